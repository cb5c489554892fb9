//! Code generation. Every entry point reads as the pipeline parse -> validate ->
//! generate; generation raises no errors (validation already reported them). On error
//! the user's item is emitted as written, plus the errors, so later diagnostics and the
//! IDE stay sane.

use crate::ast::{LoopFn, SpecFn, SpecPlan};
use crate::attr::{self, Kind, LoopArgs};
use crate::body::BodyInfo;
use crate::scan::{self, Binding, Mode};
use crate::symbol::{CONSUMED, PRINT_MACROS, STREAMS, Stream, WRITE_MACROS};
use crate::valid::{self, LoopPlan};
use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ExprForLoop, ImplItemFn, Stmt, parse_quote, parse_quote_spanned};

/// The path every generated item goes through.
fn rt() -> TokenStream {
    quote!(::tls_runtime::__private)
}

/// The same path with `span`, so that an unmet bound of a helper is reported on the
/// user's tokens.
fn rt_at(span: Span) -> TokenStream {
    quote_spanned!(span=> ::tls_runtime::__private)
}

// =======================================================================================
// #[tls_loop]
// =======================================================================================

/// `#[tls_loop(args)] item`.
pub(crate) fn tls_loop(args: TokenStream, item: TokenStream) -> TokenStream {
    let f = match LoopFn::parse(args, item.clone()) {
        Ok(f) => f,
        Err(e) => return fallback(item, e),
    };
    match valid::tls_loop(&f) {
        Ok(plans) => loop_fn(f, plans),
        Err(e) => {
            let mut func = f.func;
            Unmark.visit_block_mut(&mut func.block);
            fallback(func.into_token_stream(), e)
        }
    }
}

/// The item as written, plus the errors.
fn fallback(item: TokenStream, e: syn::Error) -> TokenStream {
    let e = e.into_compile_error();
    quote!(#item #e)
}

/// Removes inner `#[tls_loop]` marks and `checkpoint!()` statements (for the fallback,
/// where they would only add errors of their own).
struct Unmark;

impl VisitMut for Unmark {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::ForLoop(l) => l.attrs.retain(|a| !attr::is_tls_loop(a)),
            Expr::While(l) => l.attrs.retain(|a| !attr::is_tls_loop(a)),
            Expr::Loop(l) => l.attrs.retain(|a| !attr::is_tls_loop(a)),
            _ => {}
        }
        visit_mut::visit_expr_mut(self, e);
    }
    fn visit_block_mut(&mut self, b: &mut syn::Block) {
        for s in &mut b.stmts {
            if let Some(m) = scan::checkpoint_stmt(s) {
                let path = &m.path;
                *s = parse_quote!(#path!(@consumed););
            }
        }
        visit_mut::visit_block_mut(self, b);
    }
}

fn loop_fn(f: LoopFn, plans: Vec<LoopPlan>) -> TokenStream {
    let LoopFn { mut func, .. } = f;
    let mode = if scan::has_marks(&func.block) {
        Mode::Marked
    } else {
        Mode::Single
    };
    let ret = RetKind::of(&func);
    let mut epochs = EpochLoops {
        mode,
        plans: plans.into_iter(),
        ret,
    };
    epochs.visit_block_mut(&mut func.block);
    func.into_token_stream()
}

/// What `return` in an epoch returns, for the step closure's type.
#[derive(Clone)]
enum RetKind {
    /// `fn f()`: returns `()`.
    Unit,
    /// A return type that can be written inside the body.
    Named(Box<syn::Type>),
    /// `impl Trait` or elided lifetimes: left to inference.
    Infer,
}

impl RetKind {
    fn of(func: &ImplItemFn) -> RetKind {
        match &func.sig.output {
            syn::ReturnType::Default => RetKind::Unit,
            syn::ReturnType::Type(_, ty) => {
                if nameable(ty.to_token_stream()) {
                    RetKind::Named(ty.clone())
                } else {
                    RetKind::Infer
                }
            }
        }
    }

    fn tokens(&self) -> TokenStream {
        match self {
            RetKind::Unit => quote!(()),
            RetKind::Named(t) => quote!(#t),
            RetKind::Infer => quote!(_),
        }
    }
}

/// Whether a return type can be repeated inside the body (no `impl Trait`, no elided
/// or anonymous lifetimes).
fn nameable(tokens: TokenStream) -> bool {
    let tts: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tt) in tts.iter().enumerate() {
        match tt {
            TokenTree::Ident(id) if id == "impl" || id == "_" => return false,
            TokenTree::Punct(p) if p.as_char() == '&' => {
                let lifetime_next =
                    matches!(tts.get(i + 1), Some(TokenTree::Punct(q)) if q.as_char() == '\'');
                if !lifetime_next {
                    return false;
                }
            }
            TokenTree::Punct(p) if p.as_char() == '\'' => {
                if matches!(tts.get(i + 1), Some(TokenTree::Ident(id)) if id == "_") {
                    return false;
                }
            }
            TokenTree::Group(g) if !nameable(g.stream()) => {
                return false;
            }
            _ => {}
        }
    }
    true
}

/// Replaces each epoch loop of the function, found as `scan::Finder` finds them.
struct EpochLoops {
    mode: Mode,
    plans: std::vec::IntoIter<LoopPlan>,
    ret: RetKind,
}

impl VisitMut for EpochLoops {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::ForLoop(l) = e {
            let selected = match self.mode {
                Mode::Marked => scan::marked(&l.attrs).is_some(),
                Mode::Single => true,
            };
            if selected {
                if let Some(plan) = self.plans.next() {
                    let l = l.clone();
                    *e = Expr::Verbatim(epoch_loop(l, plan, &self.ret));
                }
                return;
            }
        }
        visit_mut::visit_expr_mut(self, e);
    }
    fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
    fn visit_expr_async_mut(&mut self, _: &mut syn::ExprAsync) {}
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// One epoch loop.
///
/// ```text
/// // Before
/// for PAT in ITEMS { A; checkpoint!(); B }
/// // After
/// {
///     #[derive(Clone)] enum __TlsSegment<S0, S1> { S0(S0), S1(S1) }
///     static __TLS_SITE: LoopSite = LoopSite::new();
///     let __tls_acc_total = unsafe { Accumulator::new(&mut total) }; // per accumulated variable
///     let __tls_outcome = Loop::new().site(&__TLS_SITE) /* .name .threads .chunk */
///         .run_segments(ITEMS, |item| __TlsSegment::S0(item), |segment| -> Step<_, R> {
///             match segment {
///                 __TlsSegment::S0(item) => {
///                     let PAT = item; A;
///                     return Step::Checkpoint(__TlsSegment::S1((carry(local),)));
///                 }
///                 __TlsSegment::S1((local,)) => { let local = uncarry(local); B; Step::Done(Control::Continue) }
///             }
///         });
///     if let LoopOutcome::Returned(r) = __tls_outcome { return r; }
/// }
/// ```
fn epoch_loop(l: ExprForLoop, plan: LoopPlan, ret: &RetKind) -> TokenStream {
    let rt = rt();
    let LoopPlan {
        args,
        body,
        ref_mut_params,
    } = plan;
    let reborrowed: Vec<Ident> = body
        .accumulated
        .iter()
        .filter(|v| ref_mut_params.contains(&v.to_string()))
        .cloned()
        .collect();
    let BodyInfo {
        accumulated,
        returns,
        carried,
        shared,
        ..
    } = body;
    let for_span = l.for_token.span;
    let label = l.label.as_ref().map(|lb| lb.name.ident.to_string());
    let segs = scan::segments(&l.body.stmts);
    let n = segs.len();
    let stmts = l.body.stmts;
    let r_ty = if returns {
        ret.tokens()
    } else {
        quote!(::core::convert::Infallible)
    };

    let mut arms = Vec::new();
    for (k, seg) in segs.iter().enumerate() {
        let mut rewriter = BodyRewriter {
            label: label.clone(),
            closures: 0,
            loops: 0,
            accumulated: &accumulated,
            reborrowed: &reborrowed,
        };
        let mut seg_stmts: Vec<Stmt> = stmts[seg.clone()].to_vec();
        let carried_later: Vec<&Binding> =
            carried[k.min(carried.len())..].iter().flatten().collect();
        for s in &mut seg_stmts {
            // A `let mut` whose local is mutated only after a checkpoint looks unused-mut
            // here; the mutation happens on the carried copy.
            if let Stmt::Local(local) = s {
                let mut bound = Vec::new();
                scan::pat_bindings(&local.pat, &mut bound);
                if bound
                    .iter()
                    .any(|b| b.mutable && carried_later.iter().any(|c| c.ident == b.ident))
                {
                    local.attrs.push(parse_quote!(#[allow(unused_mut)]));
                }
            }
            rewriter.visit_stmt_mut(s);
            // Statements follow, so a trailing expression needs its `;`.
            if let Stmt::Expr(_, semi @ None) = s {
                *semi = Some(Default::default());
            }
        }
        let variant = format_ident!("S{}", k);
        let (pattern, prelude) = if k == 0 {
            let pat = &l.pat;
            (
                quote!(__TlsSegment::S0(__tls_item)),
                quote!(let #pat = #rt::epoch_item(__tls_item);),
            )
        } else {
            let names: Vec<Ident> = (0..carried[k - 1].len())
                .map(|i| format_ident!("__tls_carried_{}", i))
                .collect();
            let lets = carried[k - 1].iter().zip(&names).map(|(b, c)| {
                let Binding { ident, mutable } = b;
                let m = mutable.then(|| quote!(mut));
                quote! {
                    #[allow(unused_mut, unused_variables)]
                    let #m #ident = #rt::uncarry(#c);
                }
            });
            (
                quote!(__TlsSegment::#variant((#(#names,)*))),
                quote!(#(#lets)*),
            )
        };
        // Before: checkpoint!();
        // After:  checkpoint!(@consumed);   (expands to nothing; keeps the import used)
        let consumed = if k + 1 < n {
            scan::checkpoint_stmt(&stmts[seg.end]).map(|m| {
                let path = &m.path;
                quote!(#path!(@consumed);)
            })
        } else {
            None
        };
        let tail = if k + 1 < n {
            let next = format_ident!("S{}", k + 1);
            let carry = carried[k].iter().map(|b| {
                let ident = &b.ident;
                let rt = rt_at(ident.span());
                quote_spanned!(ident.span()=> #rt::carry(#ident))
            });
            quote!(return #rt::Step::Checkpoint(__TlsSegment::#next((#(#carry,)*)));)
        } else {
            quote!(#rt::Step::Done(#rt::Control::Continue))
        };
        arms.push(quote! {
            #pattern => {
                #prelude
                #(#seg_stmts)*
                #consumed
                #tail
            }
        });
    }

    let params: Vec<Ident> = (0..n).map(|k| format_ident!("__S{}", k)).collect();
    let variants: Vec<Ident> = (0..n).map(|k| format_ident!("S{}", k)).collect();
    let holes = (0..n).map(|_| quote!(_));

    let acc_lets = accumulated.iter().map(|v| {
        let acc = acc_ident(v);
        let borrow = if reborrowed.contains(v) {
            quote_spanned!(v.span()=> &mut *#v)
        } else {
            quote_spanned!(v.span()=> &mut #v)
        };
        quote! {
            // SAFETY: the accumulator lives in this block, so it outlives the loop below,
            // whose epochs record into it.
            let #acc = unsafe { #rt::Accumulator::new(#borrow) };
            let #acc = &#acc;
        }
    });

    let LoopArgs {
        name,
        threads,
        chunk,
    } = args;
    let name = name.map(|n| {
        let n = n.0;
        quote!(.name(#n))
    });
    let threads = threads.map(|t| {
        let span = syn::spanned::Spanned::span(&t);
        quote_spanned!(span=> .threads(#t))
    });
    let chunk = chunk.map(|c| {
        let c = c.0;
        quote!(.chunk(#c))
    });
    let rt_for = rt_at(for_span);
    let new_loop = quote_spanned!(for_span=> #rt_for::Loop::new());
    let items = &l.expr;
    let items_span = syn::spanned::Spanned::span(&**items);
    let rt_items = rt_at(items_span);
    let check_items = quote_spanned!(items_span=> #rt_items::epoch_items(#items));

    // Spanned at `for`, so that a captured variable that is not `Sync` is reported
    // there rather than on the attribute.
    let step = quote_spanned! {for_span=>
        |__tls_segment| -> #rt::Step<__TlsSegment<#(#holes),*>, #r_ty> {
            match __tls_segment {
                #(#arms)*
            }
        }
    };
    let shared_checks = shared.iter().map(|v| {
        let rt = rt_at(v.span());
        quote_spanned!(v.span()=> #rt::shared_with_epochs(&#v);)
    });
    let after = if returns {
        quote! {
            if let #rt::LoopOutcome::Returned(__tls_returned) = __tls_outcome {
                return __tls_returned;
            }
        }
    } else {
        quote! {
            if let #rt::LoopOutcome::Returned(__tls_never) = __tls_outcome {
                match __tls_never {}
            }
        }
    };

    quote! {
        {
            #[allow(non_camel_case_types)]
            #[derive(Clone)]
            enum __TlsSegment<#(#params),*> {
                #(#variants(#params)),*
            }
            static __TLS_SITE: #rt::LoopSite = #rt::LoopSite::new();
            // The items first, as the sequential loop evaluates them before the body
            // runs (and before the accumulators borrow their variables).
            let __tls_items = #check_items;
            #(#shared_checks)*
            #(#acc_lets)*
            let __tls_outcome = #new_loop
                .site(&__TLS_SITE)
                #name
                #threads
                #chunk
                .run_segments(
                    __tls_items,
                    |__tls_item| __TlsSegment::S0(__tls_item),
                    #step,
                );
            #after
        }
    }
}

fn acc_ident(v: &Ident) -> Ident {
    format_ident!("__tls_acc_{}", v)
}

/// Rewrites one segment of an epoch body.
struct BodyRewriter<'a> {
    label: Option<String>,
    closures: usize,
    loops: usize,
    accumulated: &'a [Ident],
    /// Accumulated `&mut T` parameters: the accumulator holds `&mut *p`.
    reborrowed: &'a [Ident],
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

    fn accumulator(&self, i: &Ident) -> Option<Ident> {
        self.accumulated
            .iter()
            .any(|a| a == i)
            .then(|| acc_ident(i))
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
                self.loop_body(&mut l.body);
            }
            Expr::While(l) => {
                l.attrs.retain(|a| !attr::is_tls_loop(a));
                self.visit_expr_mut(&mut l.cond);
                self.loop_body(&mut l.body);
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
            // Before: value?
            // After:  match branch(value) {
            //             Continue(v) => v,
            //             Break(r) => return Step::Done(Control::Return(from_residual(r))),
            //         }
            Expr::Try(t) if self.closures == 0 => {
                self.visit_expr_mut(&mut t.expr);
                let inner = &t.expr;
                let q = t.question_token.span;
                let rt_q = rt_at(q);
                let branch = quote_spanned!(q=> #rt_q::branch(#inner));
                let from = quote_spanned!(q=> #rt_q::from_residual(__tls_residual));
                *e = Expr::Verbatim(quote! {
                    match #branch {
                        ::core::ops::ControlFlow::Continue(__tls_value) => __tls_value,
                        ::core::ops::ControlFlow::Break(__tls_residual) => {
                            return #rt::Step::Done(#rt::Control::Return(#from))
                        }
                    }
                });
            }
            // Before: total += x
            // After:  { let v = x; __tls_acc_total.record(move |t| { (*t) += v; }) }
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
                    let op = &b.op;
                    let right = &b.right;
                    let span = syn::spanned::Spanned::span(&*b);
                    let acc = Ident::new(&acc.to_string(), span);
                    let record = quote_spanned!(span=> #acc.record);
                    *e = Expr::Verbatim(quote! {
                        {
                            let __tls_value = #right;
                            #record(move |__tls_target| { #target #op __tls_value; })
                        }
                    });
                } else {
                    self.visit_expr_mut(&mut b.left);
                }
            }
            Expr::Macro(m) => {
                if let Some(x) = delayed_print(&m.mac) {
                    *e = Expr::Verbatim(x);
                }
            }
            _ => visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
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

/// `out.push(x);` as a recorded accumulation.
///
/// ```text
/// // Before
/// out.push(f(x));
/// out.extend(iter);
/// // After
/// { let a0 = f(x); __tls_acc_out.record(move |t| { (*t).push(a0); }); }
/// { let a0: Vec<_> = IntoIterator::into_iter(iter).collect(); __tls_acc_out.record(move |t| { (*t).extend(a0); }); }
/// ```
fn record_method(acc: &Ident, call: &syn::ExprMethodCall) -> TokenStream {
    let method = &call.method;
    let turbofish = &call.turbofish;
    let names: Vec<Ident> = (0..call.args.len())
        .map(|i| format_ident!("__tls_arg_{}", i))
        .collect();
    let lets = call.args.iter().zip(&names).map(|(a, n)| {
        if method == "extend" {
            // The items are computed in the epoch, which may read speculative data.
            quote!(let #n: ::std::vec::Vec<_> = ::core::iter::IntoIterator::into_iter(#a).collect();)
        } else {
            quote!(let #n = #a;)
        }
    });
    let span = syn::spanned::Spanned::span(call);
    let acc = Ident::new(&acc.to_string(), span);
    let record = quote_spanned!(span=> #acc.record);
    quote! {
        {
            #(#lets)*
            #record(move |__tls_target| { (*__tls_target).#method #turbofish(#(#names),*); });
        }
    }
}

/// `println!(...)` and friends in an epoch body, formatted in the epoch and printed at
/// commit.
///
/// ```text
/// // Before
/// println!("{i}: {}", x);
/// writeln!(std::io::stderr(), "{x}")
/// // After
/// print_at_commit(Stream::Stdout, format!("{i}: {}", x), true);
/// write_at_commit(Stream::Stderr, format!("{x}"), true)
/// ```
fn delayed_print(mac: &syn::Macro) -> Option<TokenStream> {
    let rt = rt();
    let name = scan::macro_name(mac)?;
    let stream_tokens = |s: Stream| match s {
        Stream::Stdout => quote!(#rt::Stream::Stdout),
        Stream::Stderr => quote!(#rt::Stream::Stderr),
    };
    let format = |tokens: &TokenStream| {
        if tokens.is_empty() {
            quote!(::std::string::String::new())
        } else {
            quote!(::std::format!(#tokens))
        }
    };
    if let Some((_, stream, newline)) = PRINT_MACROS.iter().find(|(n, ..)| *n == name) {
        let s = stream_tokens(*stream);
        let text = format(&mac.tokens);
        return Some(quote!(#rt::print_at_commit(#s, #text, #newline)));
    }
    let (_, newline) = WRITE_MACROS.iter().find(|(n, _)| *n == name)?;
    let (mut target, rest) = split_first_arg(mac.tokens.clone())?;
    // `stdout().lock()` writes to the same stream.
    while let Expr::MethodCall(m) = target {
        if m.method != "lock" || !m.args.is_empty() {
            return None;
        }
        target = *m.receiver;
    }
    let Expr::Call(call) = target else {
        return None;
    };
    let Expr::Path(p) = &*call.func else {
        return None;
    };
    let last = p.path.segments.last()?.ident.to_string();
    let (_, stream) = STREAMS.iter().find(|(n, _)| *n == last)?;
    if !call.args.is_empty() {
        return None;
    }
    let s = stream_tokens(*stream);
    let text = format(&rest);
    let handle = match stream {
        Stream::Stdout => quote!(::std::io::Stdout),
        Stream::Stderr => quote!(::std::io::Stderr),
    };
    // The never-called closure resolves `write_fmt` through the user's `Write` import,
    // as `write!` did, so that import stays used.
    Some(quote! {{
        let _ = |__tls_w: &mut #handle| __tls_w.write_fmt(::core::format_args!(""));
        #rt::write_at_commit(#s, #text, #newline)
    }})
}

/// `a, rest...` -> (`a`, `rest...`).
fn split_first_arg(tokens: TokenStream) -> Option<(Expr, TokenStream)> {
    use syn::parse::Parser;
    let parser = |input: syn::parse::ParseStream<'_>| {
        let first: Expr = input.parse()?;
        let rest = if input.is_empty() {
            TokenStream::new()
        } else {
            input.parse::<syn::Token![,]>()?;
            input.parse::<TokenStream>()?
        };
        Ok((first, rest))
    };
    parser.parse2(tokens).ok()
}

// =======================================================================================
// #[escape], #[on_violation], #[on_commit]
// =======================================================================================

/// `#[escape]`, `#[on_violation]` or `#[on_commit]` on `item`, with its siblings.
pub(crate) fn spec_fn(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    if args.to_string().replace(' ', "") == CONSUMED {
        return TokenStream::new();
    }
    let f = match SpecFn::parse(kind, args, item.clone()) {
        Ok(f) => f,
        Err(e) => return fallback(item, e),
    };
    match valid::spec_fn(&f) {
        // Before: #[escape] #[on_violation(undo)] fn f() {..}   (expanding `escape`)
        // After:  fn f() { #[on_violation(@consumed)] fn __tls_consumed() {} .. }
        Ok(plan) => spec_body(with_consumed_siblings(f), plan),
        Err(e) => {
            let func = with_consumed_siblings(f);
            fallback(func.into_token_stream(), e)
        }
    }
}

/// The function with `#[sibling(@consumed)] fn __tls_consumed() {}` items for the
/// sibling attributes taken off it, so that their imports count as used.
fn with_consumed_siblings(f: SpecFn) -> ImplItemFn {
    let consumed: Vec<TokenStream> = f
        .attrs
        .iter()
        .filter_map(|a| a.attr.as_ref())
        .map(|a| {
            let path = a.path();
            quote!(#[#path(@consumed)] fn __tls_consumed() {})
        })
        .collect();
    let mut func = f.func;
    if !consumed.is_empty() {
        let block = &func.block;
        func.block = parse_quote!({ #(#consumed)* #block });
    }
    func
}

fn spec_body(mut func: ImplItemFn, plan: SpecPlan) -> TokenStream {
    let rt = rt();
    let block = &func.block;
    let closure_ret = match &func.sig.output {
        syn::ReturnType::Type(_, ty) if nameable(ty.to_token_stream()) => quote!(-> #ty),
        syn::ReturnType::Default => quote!(-> ()),
        _ => quote!(),
    };
    let new_block: syn::Block = if plan.on_commit {
        // Before: #[on_commit] fn log(line: String) { body }
        // After:  fn log(line: String) {
        //             let line = commit_arg(line);            // Send + 'static, checked here
        //             delay_call(move || { let line = commit_arg_value(line); body })
        //         }
        let named: Vec<&syn::PatIdent> = func
            .sig
            .inputs
            .iter()
            .filter_map(|a| match a {
                syn::FnArg::Typed(t) => match &*t.pat {
                    syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(p),
                    _ => None,
                },
                syn::FnArg::Receiver(_) => None,
            })
            .collect();
        let check = named.iter().map(|p| {
            let ident = &p.ident;
            let rt_a = rt_at(ident.span());
            quote_spanned!(ident.span()=> let #ident = #rt_a::commit_arg(#ident);)
        });
        let take = named.iter().map(|p| {
            let ident = &p.ident;
            let m = &p.mutability;
            quote!(let #m #ident = #rt::commit_arg_value(#ident);)
        });
        parse_quote!({
            #(#check)*
            #rt::delay_call(move || #closure_ret { #(#take)* #block })
        })
    } else {
        let escape = plan.escape.unwrap_or_default();
        // Before: #[escape(check = ok)] #[on_violation(undo)] fn get(pool: &Pool, id: u32) -> R { body }
        // After:  fn get(pool: &Pool, id: u32) -> R {
        //             static LOCK: EscapeLock = EscapeLock::new();
        //             escape_checked(&LOCK, || ok(pool, &id), || ());
        //             let ret = escape(&LOCK, || -> R { body });
        //             if is_speculative() { undo_with(&ret, undo_action(&ret, undo)); }
        //             ret
        //         }
        let check = escape.check.map(|check| {
            let args = check_args(&func.sig);
            let span = syn::spanned::Spanned::span(&check);
            let rt_c = rt_at(span);
            let call = quote_spanned!(span=> #rt_c::verdict((#check)(#(#args),*)));
            quote!(#rt::escape_checked(&__TLS_ESCAPE_LOCK, || #call, || ());)
        });
        let undo = plan.undo.map(|undo| {
            let span = syn::spanned::Spanned::span(&undo);
            let rt_u = rt_at(span);
            let action = quote_spanned!(span=> #rt_u::undo_action(&__tls_returned, #undo));
            let ret_span = match &func.sig.output {
                syn::ReturnType::Type(_, ty) => syn::spanned::Spanned::span(ty),
                syn::ReturnType::Default => func.sig.ident.span(),
            };
            let rt_r = rt_at(ret_span);
            let keep = quote_spanned!(ret_span=> #rt_r::keep_for_undo(&__tls_returned));
            quote! {
                if #rt::is_speculative() {
                    let __tls_kept = #keep;
                    #rt::undo_with(__tls_kept, #action);
                }
            }
        });
        parse_quote!({
            static __TLS_ESCAPE_LOCK: #rt::EscapeLock = #rt::EscapeLock::new();
            #check
            let __tls_returned = #rt::escape(&__TLS_ESCAPE_LOCK, || #closure_ret #block);
            #undo
            __tls_returned
        })
    };
    func.block = new_block;
    func.into_token_stream()
}

/// The escaped function's arguments as the check receives them: shared references
/// (references as they are).
fn check_args(sig: &syn::Signature) -> Vec<TokenStream> {
    sig.inputs
        .iter()
        .map(|arg| match arg {
            syn::FnArg::Receiver(r) => match &r.kind {
                syn::ReceiverKind::Reference(_, _, None) => quote!(self),
                syn::ReceiverKind::Reference(_, _, Some(_)) => quote!(&*self),
                _ => quote!(&self),
            },
            syn::FnArg::Typed(t) => {
                let pat = &t.pat;
                match &*t.ty {
                    syn::Type::Reference(r) if r.mutability.is_none() => quote!(#pat),
                    syn::Type::Reference(_) => quote!(&*#pat),
                    _ => quote!(&#pat),
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_types_that_can_be_repeated_in_the_body() {
        assert!(nameable(quote!(Result<Vec<&'a str>, Error>)));
        assert!(nameable(quote!(Option<&'static T>)));
        assert!(!nameable(quote!(impl Iterator<Item = u32>)));
        assert!(!nameable(quote!(Option<&str>)));
        assert!(!nameable(quote!(Cursor<'_>)));
    }

    #[test]
    fn print_macros_are_delayed_and_other_writes_are_not() {
        let m: syn::Macro = syn::parse_quote!(println!("{x}"));
        let out = delayed_print(&m).unwrap().to_string();
        assert!(out.contains("print_at_commit"), "{out}");
        let m: syn::Macro = syn::parse_quote!(writeln!(std::io::stderr(), "{x}"));
        assert!(delayed_print(&m).unwrap().to_string().contains("Stderr"));
        let m: syn::Macro = syn::parse_quote!(write!(io::stdout().lock(), "{x}"));
        assert!(delayed_print(&m).unwrap().to_string().contains("Stdout"));
        let m: syn::Macro = syn::parse_quote!(writeln!(file, "{x}"));
        assert!(delayed_print(&m).is_none());
    }
}
