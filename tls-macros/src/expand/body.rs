//! Rewriting one segment of an epoch loop's body (what `crate::body` read, this
//! changes): control flow that leaves the epoch becomes a `Step`, accumulations into
//! outer variables are recorded, loops poll for a violation, prints are delayed.

use super::print::delayed_print;
use super::rt::{rt, rt_at};
use crate::symbol::COPYING_APPENDS;
use crate::{attr, scan};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, Stmt, parse_quote, parse_quote_spanned};

/// The accumulator of the outer variable `v`.
pub(super) fn acc_ident(v: &Ident) -> Ident {
    format_ident!("__tls_acc_{}", v)
}

/// Rewrites one segment of an epoch body.
pub(super) struct BodyRewriter<'a> {
    label: Option<String>,
    closures: usize,
    loops: usize,
    accumulated: &'a [Ident],
    /// Accumulated `&mut T` parameters: the accumulator holds `&mut *p`.
    reborrowed: &'a [Ident],
    /// The names the body binds around the current point, which shadow the accumulated
    /// variables of those names there (as `crate::body` read them).
    scopes: crate::scopes::Scopes,
}

impl<'a> BodyRewriter<'a> {
    /// A rewriter for the body of the epoch loop labelled `label` (if it is), whose
    /// accumulators are those of `accumulated`; `scopes` holds what is bound where the
    /// rewritten statements start.
    pub(super) fn new(
        label: Option<String>,
        accumulated: &'a [Ident],
        reborrowed: &'a [Ident],
        scopes: crate::scopes::Scopes,
    ) -> Self {
        BodyRewriter {
            label,
            closures: 0,
            loops: 0,
            accumulated,
            reborrowed,
            scopes,
        }
    }
}

impl BodyRewriter<'_> {
    fn targets_this_loop(&self, label: Option<&syn::Lifetime>) -> bool {
        if self.closures > 0 {
            return false;
        }
        match label {
            Some(l) => self.label.as_deref() == Some(&*l.ident.to_string()),
            None => self.loops == 0,
        }
    }

    /// The accumulator of `i`, when `i` here is an accumulated variable (not a local of
    /// the body shadowing it).
    fn accumulator(&self, i: &Ident) -> Option<Ident> {
        (self.accumulated.iter().any(|a| a == i) && !self.scopes.binds(i)).then(|| acc_ident(i))
    }

    fn loop_body(&mut self, body: &mut syn::Block) {
        self.loops += 1;
        self.visit_block_mut(body);
        self.loops -= 1;
        // Before: while c { body }
        // After:  while c { ::tls_runtime::__private::poll(); body }
        let rt = rt();
        body.stmts.insert(0, parse_quote!(#rt::poll();));
    }
}

impl BodyRewriter<'_> {
    /// Rewrites the `?` and `return` in a standard macro's arguments
    /// ([`scan::control_flow_args`]) as in the body. A named format argument's name
    /// (`name = value`) stays as written; its value is rewritten.
    fn rewrite_macro_args(&mut self, mac: &mut syn::Macro) {
        if self.closures > 0 {
            return;
        }
        let Some(mut args) = scan::control_flow_args(mac) else {
            return;
        };
        for a in args.iter_mut() {
            match a {
                Expr::Assign(named) => self.visit_expr_mut(&mut named.right),
                _ => self.visit_expr_mut(a),
            }
        }
        mac.tokens = quote!(#args);
    }
}

impl VisitMut for BodyRewriter<'_> {
    fn visit_stmt_mut(&mut self, s: &mut Stmt) {
        if let Stmt::Expr(Expr::MethodCall(call), Some(_)) = s
            && let Some(acc) = scan::accumulating_receiver(call).and_then(|r| self.accumulator(r))
        {
            for a in call.args.iter_mut() {
                self.visit_expr_mut(a);
            }
            *s = Stmt::Expr(Expr::Verbatim(record_method(&acc, call)), None);
            return;
        }
        if let Stmt::Macro(m) = s {
            self.rewrite_macro_args(&mut m.mac);
        }
        if let Stmt::Macro(m) = s
            && let Some(e) = delayed_print(&m.mac)
        {
            let semi = m.semi_token.or(Some(Default::default()));
            *s = Stmt::Expr(Expr::Verbatim(e), semi);
            return;
        }
        visit_mut::visit_stmt_mut(self, s);
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let rt = rt();
        match e {
            Expr::Closure(_) | Expr::Async(_) => {
                self.closures += 1;
                visit_mut::visit_expr_mut(self, e);
                self.closures -= 1;
            }
            Expr::ForLoop(l) => {
                l.attrs.retain(|a| !attr::is_tls_loop(a));
                self.visit_expr_mut(&mut l.expr);
                self.scopes.push();
                self.scopes.bind(&l.pat);
                self.loop_body(&mut l.body);
                self.scopes.pop();
            }
            Expr::While(l) => {
                l.attrs.retain(|a| !attr::is_tls_loop(a));
                // `while let` binds in the condition and the body.
                self.scopes.push();
                self.visit_expr_mut(&mut l.cond);
                self.loop_body(&mut l.body);
                self.scopes.pop();
            }
            Expr::Loop(l) => {
                l.attrs.retain(|a| !attr::is_tls_loop(a));
                self.loop_body(&mut l.body);
            }
            // Before: break            (this loop's)
            // After:  return Step::Done(Control::Break)
            Expr::Break(b) if self.targets_this_loop(b.label.as_ref()) => {
                let span = b.break_token.span;
                *e = parse_quote_spanned!(span=> return #rt::Step::Done(#rt::Control::Break));
            }
            // Before: continue         (this loop's)
            // After:  return Step::Done(Control::Continue)
            Expr::Continue(c) if self.targets_this_loop(c.label.as_ref()) => {
                let span = c.continue_token.span;
                *e = parse_quote_spanned!(span=> return #rt::Step::Done(#rt::Control::Continue));
            }
            // Before: return value
            // After:  return Step::Done(Control::Return(value))
            Expr::Return(r) if self.closures == 0 => {
                if let Some(v) = &mut r.expr {
                    self.visit_expr_mut(v);
                }
                let v = match &r.expr {
                    Some(v) => quote!(#v),
                    None => quote!(()),
                };
                let span = r.return_token.span;
                *e = parse_quote_spanned!(span=> return #rt::Step::Done(#rt::Control::Return(#v)));
            }
            Expr::Try(t) if self.closures == 0 => {
                self.visit_expr_mut(&mut t.expr);
                *e = Expr::Verbatim(try_as_step(t));
            }
            Expr::Binary(b) if scan::is_assign_op(&b.op) => {
                let target_var = scan::plain_target(&b.left).cloned();
                let acc = target_var.as_ref().and_then(|i| self.accumulator(i));
                self.visit_expr_mut(&mut b.right);
                if let (Some(acc), Some(var)) = (acc, target_var) {
                    let target = if self.reborrowed.contains(&var) {
                        quote!((*__tls_target))
                    } else {
                        retarget(&b.left)
                    };
                    *e = Expr::Verbatim(record_assign(&acc, b, target));
                } else {
                    self.visit_expr_mut(&mut b.left);
                }
            }
            Expr::Macro(m) => {
                self.rewrite_macro_args(&mut m.mac);
                if let Some(x) = delayed_print(&m.mac) {
                    *e = Expr::Verbatim(x);
                }
            }
            _ => visit_mut::visit_expr_mut(self, e),
        }
    }

    // Scopes, as `crate::body` tracks them: a local of the body shadows an accumulated
    // variable of the same name from its binding to the end of its block, arm or
    // closure, and there the name is left as written.
    //
    // Before: total += x; { let mut total = 1; total += x; }
    // After:  { let v = x; __tls_acc_total.record(move |t| { (*t) += v; }) };
    //         { let mut total = 1; total += x; }

    fn visit_block_mut(&mut self, b: &mut syn::Block) {
        self.scopes.push();
        self.scopes.bind_items(&b.stmts);
        visit_mut::visit_block_mut(self, b);
        self.scopes.pop();
    }

    fn visit_local_mut(&mut self, l: &mut syn::Local) {
        // The initializer and `else` block see the names the `let` shadows.
        if let Some(init) = &mut l.init {
            self.visit_expr_mut(&mut init.expr);
            if let Some((_, diverge)) = &mut init.diverge {
                self.visit_expr_mut(diverge);
            }
        }
        self.scopes.bind(&l.pat);
    }

    fn visit_arm_mut(&mut self, a: &mut syn::Arm) {
        self.scopes.push();
        self.scopes.bind(&a.pat);
        visit_mut::visit_arm_mut(self, a);
        self.scopes.pop();
    }

    fn visit_expr_closure_mut(&mut self, c: &mut syn::ExprClosure) {
        self.scopes.push();
        for p in &c.inputs {
            self.scopes.bind(p);
        }
        visit_mut::visit_expr_closure_mut(self, c);
        self.scopes.pop();
    }

    fn visit_expr_if_mut(&mut self, e: &mut syn::ExprIf) {
        // `if let` binds in the condition and the `then` block, not in `else`.
        self.scopes.push();
        self.visit_expr_mut(&mut e.cond);
        self.visit_block_mut(&mut e.then_branch);
        self.scopes.pop();
        if let Some((_, els)) = &mut e.else_branch {
            self.visit_expr_mut(els);
        }
    }

    fn visit_expr_let_mut(&mut self, e: &mut syn::ExprLet) {
        self.visit_expr_mut(&mut e.expr);
        self.scopes.bind(&e.pat);
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// `value?` in an epoch, returning the residual from the function.
///
/// ```text
/// // Before
/// value?
/// // After
/// match branch(value) {
///     Continue(v) => v,
///     Break(r) => return Step::Done(Control::Return(from_residual(r))),
/// }
/// ```
fn try_as_step(t: &syn::ExprTry) -> TokenStream {
    let rt = rt();
    // `(*x)?` passes `*x`: parentheses kept around the call's argument would draw
    // `unused_parens` on the user's line, whose suggested fix changes its meaning.
    let mut inner = &*t.expr;
    while let Expr::Paren(p) = inner {
        inner = &p.expr;
    }
    let q = t.question_token.span;
    let rt_q = rt_at(q);
    let branch = quote_spanned!(q=> #rt_q::branch(#inner));
    // Named with the span its binding below has: with the `?`'s span, a `?` that
    // reached the function through a `macro_rules!` macro would name another variable
    // (that macro's hygiene), which nothing binds.
    let residual = Ident::new("__tls_residual", proc_macro2::Span::call_site());
    let from = quote_spanned!(q=> #rt_q::from_residual(#residual));
    quote! {
        match #branch {
            ::core::ops::ControlFlow::Continue(__tls_value) => __tls_value,
            ::core::ops::ControlFlow::Break(#residual) => {
                return #rt::Step::Done(#rt::Control::Return(#from))
            }
        }
    }
}

/// `total += x` as a recorded accumulation into `target` (the accumulator's `&mut`).
/// A right side written as a borrow (`text += &s`, `sum += &*boxed`) is kept as a
/// copy where its type has one (`ToOwned`), and the update borrows the copy: the
/// borrowed value may be the iteration's own, gone when the update runs at commit;
/// a type without one keeps the borrow, which must then outlive the loop (see
/// `tls-runtime`'s `deferred/append.rs`, `Borrowed`).
///
/// ```text
/// // Before
/// total += x
/// text += &s
/// // After
/// { let v = x; __tls_acc_total.record(move |t| { (*t) += v; }) }
/// { let v = (&Borrowed(&s)).keep(); __tls_acc_text.record(move |t| { (*t) += v.get(); }) }
/// ```
fn record_assign(acc: &Ident, b: &syn::ExprBinary, target: TokenStream) -> TokenStream {
    let op = &b.op;
    let span = syn::spanned::Spanned::span(b);
    let acc = Ident::new(&acc.to_string(), span);
    let record = quote_spanned!(span=> #acc.record);
    let rt = rt();
    let (value, used) = match &*b.right {
        Expr::Reference(r) if r.mutability.is_none() => {
            let borrowed = &r.expr;
            let at = syn::spanned::Spanned::span(r);
            // Spanned on the user's borrow, so that a borrow of the iteration's own
            // value that must be kept (its type has no copy) is reported there.
            let keep = quote_spanned!(at=> keep);
            let borrow = quote_spanned!(at=> &#borrowed);
            (
                quote! {{
                    #[allow(unused_imports)]
                    use #rt::{KeepBorrow as _, KeepCopy as _};
                    (&#rt::Borrowed(#borrow)).#keep()
                }},
                quote!(#rt::KeptBorrow::get(&__tls_value)),
            )
        }
        right => (quote!(#right), quote!(__tls_value)),
    };
    quote! {
        {
            let __tls_value = #value;
            #record(move |__tls_target| { #target #op #used; })
        }
    }
}

/// The accumulation target with its variable replaced by the accumulator's `&mut`.
fn retarget(e: &Expr) -> TokenStream {
    match e {
        Expr::Paren(p) => retarget(&p.expr),
        Expr::Unary(u) => {
            let inner = retarget(&u.expr);
            quote!(*#inner)
        }
        _ => quote!((*__tls_target)),
    }
}

/// `out.push(x);` as a recorded accumulation. The appends that copy from what they
/// are given (`push_str`, `extend_from_slice`, `extend`) go through
/// `Appending` (see `tls-runtime`'s `deferred/append.rs`): on a standard collection
/// they are applied at once to a new part, appended at commit, so that they may
/// borrow the iteration's own data as the sequential call may.
///
/// ```text
/// // Before
/// out.push(f(x));
/// out.extend(iter);
/// // After
/// { let a0 = f(x); __tls_acc_out.record(move |t| { (*t).push(a0); }); }
/// { let a0 = (&ExtendArg::new(iter)).take_arg(); // collected if an iterator
///   (&Appending(__tls_acc_out)).append_with(move |t| { (*t).extend(a0); }); }
/// ```
fn record_method(acc: &Ident, call: &syn::ExprMethodCall) -> TokenStream {
    let method = &call.method;
    let turbofish = &call.turbofish;
    let names: Vec<Ident> = (0..call.args.len())
        .map(|i| format_ident!("__tls_arg_{}", i))
        .collect();
    let lets = call.args.iter().zip(&names).map(|(a, n)| {
        if method == "extend" {
            // An iterator's items are computed in the epoch, which may read
            // speculative data; any other argument (a program's own `extend` may
            // take anything) is kept as it is.
            let rt = rt();
            quote! {
                #[allow(unused_imports)]
                use #rt::{CollectIterator as _, KeepArg as _};
                let #n = (&#rt::ExtendArg::new(#a)).take_arg();
            }
        } else {
            quote!(let #n = #a;)
        }
    });
    let span = syn::spanned::Spanned::span(call);
    let acc = Ident::new(&acc.to_string(), span);
    let update = quote!(move |__tls_target| { (*__tls_target).#method #turbofish(#(#names),*); });
    let record = if COPYING_APPENDS.iter().any(|m| method == m) {
        let rt = rt();
        let append = quote_spanned!(span=> append_with);
        quote! {
            #[allow(unused_imports)]
            use #rt::{AppendInPlace as _, AppendToPart as _};
            (&#rt::Appending(#acc)).#append(#update);
        }
    } else {
        let record = quote_spanned!(span=> #acc.record);
        quote!(#record(#update);)
    };
    quote! {
        {
            #(#lets)*
            #record
        }
    }
}
