//! Reading one epoch loop's body: control flow that leaves the epoch, write-only
//! accumulations into outer variables, and the uses of outer variables that would be a
//! dependence between epochs (reported by `valid.rs`).

use crate::scan::{self, Binding};
use crate::scopes::Scopes;
use proc_macro2::Ident;
use std::collections::BTreeSet;
use syn::visit::{self, Visit};
use syn::{Expr, ExprForLoop, Stmt};

/// What one epoch loop's body does.
pub(crate) struct BodyInfo {
    /// Outer variables accumulated into, in order of first accumulation.
    pub(crate) accumulated: Vec<Ident>,
    /// Whether the body has a `return` or `?` of the enclosing function.
    pub(crate) returns: bool,
    /// Variables of the function the body reads (checked to be `Sync`), each at its
    /// first mention.
    pub(crate) shared: Vec<Ident>,
    /// Locals carried across each top-level `checkpoint!()`.
    pub(crate) carried: Vec<Vec<Binding>>,
    /// What `valid.rs` reports.
    pub(crate) errors: Vec<syn::Error>,
}

/// Reads the body of `f`; `outer_muts` are the `mut` variables of the function.
pub(crate) fn analyze(
    f: &ExprForLoop,
    outer_muts: &BTreeSet<String>,
    variables: &BTreeSet<String>,
) -> BodyInfo {
    let mut w = Walker {
        scopes: Scopes::loop_body(&f.pat, &f.body.stmts, 0),
        outer_muts,
        loop_label: f.label.as_ref().map(|l| l.name.ident.to_string()),
        labels: Vec::new(),
        closures: 0,
        loops: 0,
        accumulated: Vec::new(),
        mentions: Vec::new(),
        returns: false,
        errors: Vec::new(),
    };
    for s in &f.body.stmts {
        if scan::checkpoint_stmt(s).is_none() {
            w.visit_stmt(s);
        }
    }
    let mut errors = w.errors;
    for m in &w.mentions {
        if let Some(acc) = w.accumulated.iter().find(|a| *a == m) {
            errors.push(syn::Error::new(
                m.span(),
                format!(
                    "`{acc}` is accumulated into in this `#[tls_loop]` loop, so the loop cannot also \
                     read it: its value in an epoch would depend on earlier epochs; keep `{acc}` \
                     write-only here, use `Spec<T>` if iterations must read it, or keep the loop sequential"
                ),
            ));
        }
    }
    let mut shared: Vec<Ident> = Vec::new();
    for m in &w.mentions {
        let name = m.to_string();
        if variables.contains(&name)
            && !w.accumulated.iter().any(|a| a == m)
            && !shared.iter().any(|s| s == m)
        {
            shared.push(m.clone());
        }
    }
    BodyInfo {
        shared,
        accumulated: w.accumulated,
        returns: w.returns,
        carried: crate::scopes::carried(f),
        errors,
    }
}

struct Walker<'o> {
    /// The names the body binds around the current point: there, not outer.
    scopes: Scopes,
    outer_muts: &'o BTreeSet<String>,
    loop_label: Option<String>,
    /// Labels of loops and blocks inside the body that enclose the current point.
    labels: Vec<String>,
    closures: usize,
    loops: usize,
    accumulated: Vec<Ident>,
    mentions: Vec<Ident>,
    returns: bool,
    errors: Vec<syn::Error>,
}

impl Walker<'_> {
    /// Whether `i` here names a variable declared outside the loop (not shadowed by a
    /// binding of the body in scope).
    fn outer(&self, i: &Ident) -> bool {
        !self.scopes.binds(i)
    }

    fn accumulate(&mut self, i: &Ident) {
        if !self.accumulated.iter().any(|a| a == i) {
            self.accumulated.push(i.clone());
        }
    }

    fn error(&mut self, tokens: impl quote::ToTokens, msg: String) {
        self.errors.push(syn::Error::new_spanned(tokens, msg));
    }

    fn check_label(&mut self, label: Option<&syn::Lifetime>, what: &str) {
        let Some(l) = label else { return };
        let name = l.ident.to_string();
        if self.closures > 0
            || self.labels.contains(&name)
            || self.loop_label.as_ref() == Some(&name)
        {
            return;
        }
        self.error(
            l,
            format!(
                "`{what} '{name}` leaves the `#[tls_loop]` loop for an enclosing loop or block, which \
                 epochs cannot do; `{what}` only to the `#[tls_loop]` loop's own label or to loops \
                 inside its body, or return a value and branch after the loop"
            ),
        );
    }

    fn in_loop(&mut self, label: Option<&syn::Label>, visit: impl FnOnce(&mut Self)) {
        let pushed = label
            .map(|l| self.labels.push(l.name.ident.to_string()))
            .is_some();
        self.loops += 1;
        visit(self);
        self.loops -= 1;
        if pushed {
            self.labels.pop();
        }
    }
}

/// The message for `place op= ...` on a field or an element of an outer variable:
/// only a whole variable can be an accumulation.
fn part_accumulation_error(place: &Expr, root: &Ident) -> String {
    let field = matches!(place, Expr::Field(_));
    let place = scan::place_text(place).unwrap_or_else(|| root.to_string());
    // A field can be borrowed whole before the loop; an element the loop picks
    // cannot.
    let borrow = if field {
        format!("borrow it before the loop (`let v = &mut {place};`, then `*v += ..` in it), ")
    } else {
        String::new()
    };
    format!(
        "cannot accumulate into `{place}` in a `#[tls_loop]` loop: only a whole variable \
         declared outside the loop can be an accumulation (`total += x`, `out.push(x)`), not \
         a field or an element of one, since epochs running in parallel would race on it; \
         {borrow}accumulate into a local declared before the loop and assign `{place}` from \
         it after the loop, use `Spec<T>` or `SpecVec<T>` for data that iterations share, or \
         keep the loop sequential"
    )
}

/// The variable a `write!` / `writeln!` writes into, when it is a plain name
/// (`write!(out, ..)`, `write!(&mut out, ..)`).
fn written_target(m: &syn::Macro) -> Option<Ident> {
    let name = scan::macro_name(m)?;
    if name != "write" && name != "writeln" {
        return None;
    }
    let args = m
        .parse_body_with(syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated)
        .ok()?;
    let mut first = args.first()?;
    if let Expr::Reference(r) = first {
        first = &r.expr;
    }
    match first {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().cloned(),
        _ => None,
    }
}

fn assign_error(name: &Ident) -> String {
    format!(
        "cannot assign to `{name}` in a `#[tls_loop]` loop: it is declared outside the loop, so \
         epochs running in parallel would race on it; use `Spec<T>` for data that iterations \
         share, make it a write-only accumulation (`{name} += ...`, `{name}.push(...)`), or keep \
         the loop sequential"
    )
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_stmt(&mut self, s: &'ast Stmt) {
        if let Stmt::Expr(Expr::MethodCall(call), Some(_)) = s
            && let Some(recv) = scan::accumulating_receiver(call)
            && self.outer(recv)
            && self.outer_muts.contains(&recv.to_string())
        {
            self.accumulate(recv);
            for a in &call.args {
                self.visit_expr(a);
            }
            return;
        }
        if let Some(m) = scan::checkpoint_stmt(s) {
            self.error(
                m,
                "`checkpoint!()` must be a statement at the top level of the `#[tls_loop]` loop \
                 body, not inside a block, branch, closure or nested loop"
                    .into(),
            );
            return;
        }
        visit::visit_stmt(self, s);
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Assign(a) => {
                if let Some(root) = scan::root_ident(&a.left).filter(|r| self.outer(r)) {
                    let root = root.clone();
                    self.error(&a.left, assign_error(&root));
                    self.visit_expr(&a.right);
                    return;
                }
            }
            Expr::Binary(b) if scan::is_assign_op(&b.op) => {
                if let Some(root) = scan::root_ident(&b.left).filter(|r| self.outer(r)) {
                    let root = root.clone();
                    if scan::plain_target(&b.left).is_some() && root != "self" {
                        self.accumulate(&root);
                    } else if scan::plain_target(&b.left).is_none() {
                        self.error(&b.left, part_accumulation_error(&b.left, &root));
                    } else {
                        self.error(&b.left, assign_error(&root));
                    }
                    self.visit_expr(&b.right);
                    return;
                }
            }
            Expr::Reference(r) if r.mutability.is_some() => {
                if let Some(root) = scan::root_ident(&r.expr).filter(|r| self.outer(r)) {
                    let msg = format!(
                        "cannot borrow `{root}` mutably in a `#[tls_loop]` loop: it is declared \
                         outside the loop, so epochs running in parallel would race on it; use \
                         `Spec<T>` for data that iterations share, make the update a write-only \
                         accumulation (`{root} += ...`, `{root}.push(...)`), or keep the loop sequential"
                    );
                    self.error(r, msg);
                }
            }
            Expr::MethodCall(call) => {
                if let Some(recv) = scan::accumulating_receiver(call)
                    && self.outer(recv) && self.outer_muts.contains(&recv.to_string()) {
                        let msg = format!(
                            "the result of `{recv}.{}(...)` is used, so it is not a write-only \
                             accumulation into `{recv}` (declared outside the `#[tls_loop]` loop); \
                             write it as a statement whose result is unused, use a speculative \
                             container (`SpecVec`, `SpecMap`), or keep the loop sequential",
                            call.method
                        );
                        self.error(call, msg);
                    }
            }
            Expr::Path(p) => {
                if let (None, Some(i)) = (&p.qself, p.path.get_ident())
                    && self.outer(i) {
                        self.mentions.push(i.clone());
                    }
            }
            Expr::Yield(y) if self.closures == 0 => self.error(
                y.yield_token,
                "`yield` cannot be used in a `#[tls_loop]` loop body: epochs run on other threads \
                 and cannot suspend"
                    .into(),
            ),
            Expr::Await(a) if self.closures == 0 => self.error(
                a.await_token,
                "`.await` cannot be used in a `#[tls_loop]` loop body: epochs run on other threads \
                 and cannot suspend; await before or after the loop"
                    .into(),
            ),
            Expr::Break(b) => {
                self.check_label(b.label.as_ref(), "break");
            }
            Expr::Continue(c) => {
                self.check_label(c.label.as_ref(), "continue");
            }
            Expr::Return(_) | Expr::Try(_) if self.closures == 0 => self.returns = true,
            Expr::Closure(_) | Expr::Async(_) => {
                self.closures += 1;
                visit::visit_expr(self, e);
                self.closures -= 1;
                return;
            }
            Expr::ForLoop(f) => {
                self.in_loop(f.label.as_ref(), |w| w.visit_expr_for_loop(f));
                return;
            }
            Expr::While(f) => {
                if let Some(a) = scan::marked(&f.attrs) {
                    self.error(a, only_for("while"));
                }
                self.in_loop(f.label.as_ref(), |w| w.visit_expr_while(f));
                return;
            }
            Expr::Loop(f) => {
                if let Some(a) = scan::marked(&f.attrs) {
                    self.error(a, only_for("loop"));
                }
                self.in_loop(f.label.as_ref(), |w| visit::visit_expr_loop(w, f));
                return;
            }
            Expr::Block(b) if b.label.is_some() => {
                let name = b.label.as_ref().map(|l| l.name.ident.to_string()).unwrap_or_default();
                self.labels.push(name);
                visit::visit_expr(self, e);
                self.labels.pop();
                return;
            }
            _ => {}
        }
        visit::visit_expr(self, e);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if scan::is_checkpoint(m) {
            self.error(
                m,
                "`checkpoint!()` must be a statement at the top level of the `#[tls_loop]` loop \
                 body, not inside a block, branch, closure or nested loop"
                    .into(),
            );
            return;
        }
        // `write!(out, ..)` borrows `out` mutably (`out.write_fmt(..)`): into a
        // variable declared outside the loop, a race, which rustc would report as a
        // borrow in a closure the user never wrote.
        if let Some(out) = written_target(m)
            && self.outer(&out)
        {
            let msg = format!(
                "cannot `write!` into `{out}` in a `#[tls_loop]` loop: it is declared outside \
                 the loop, so epochs running in parallel would race on it; push each piece into \
                 an accumulation (`parts.push(format!(...))`) and join after the loop, or keep \
                 the loop sequential"
            );
            self.error(m, msg);
        }
        // A `?` or `return` in a standard macro's arguments returns from the loop as
        // one in the body does (the rewriting reaches it too).
        if self.closures == 0 && scan::control_flow_args(m).is_some() {
            self.returns = true;
        }
        let mut names = Vec::new();
        scan::token_mentions(m.tokens.clone(), &mut names);
        for n in names {
            if self.outer(&n) {
                self.mentions.push(n);
            }
        }
    }

    // Scopes: a name the body binds is a local of the epoch from its binding to the end
    // of its block, arm, closure or loop, shadowing the function's variable of that name.

    crate::scopes::scoped_walk!();

    fn visit_local(&mut self, l: &'ast syn::Local) {
        // The initializer and `else` block first: the new names are not bound there
        // (`let total = total + 1;` reads the outer `total`).
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        self.visit_pat(&l.pat);
        self.scopes.bind(&l.pat);
    }

    fn visit_expr_for_loop(&mut self, e: &'ast ExprForLoop) {
        self.visit_expr(&e.expr);
        self.scopes.push();
        self.scopes.bind(&e.pat);
        self.visit_pat(&e.pat);
        self.visit_block(&e.body);
        self.scopes.pop();
    }

    fn visit_expr_let(&mut self, e: &'ast syn::ExprLet) {
        self.visit_expr(&e.expr);
        self.visit_pat(&e.pat);
        self.scopes.bind(&e.pat);
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The message for `#[tls_loop]` on a `while` or `loop`.
pub(crate) fn only_for(kw: &str) -> String {
    format!(
        "`#[tls_loop]` runs the iterations of a `for` loop as epochs; a `{kw}` loop has no items \
         to split into epochs: rewrite it as `for` over an iterator, or remove the attribute"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn read(f: &ExprForLoop) -> BodyInfo {
        analyze(
            f,
            &set(&["total", "out"]),
            &set(&["total", "out", "v", "x"]),
        )
    }

    #[test]
    fn locals_shadow_an_accumulated_variable_to_the_end_of_their_scope() {
        let f: ExprForLoop = syn::parse_quote! {
            for &x in v {
                total += x;
                {
                    let mut total = 1;
                    total += x;
                    assert!(total > 0);
                }
                let add = |mut out: Vec<u64>| out.push(x);
                match x { 0 => {} mut out => out += 1 }
                if let Some(mut out) = None::<Vec<u64>> { out.push(x); } else { out.push(x); }
                let mut total = x;
                total += 1;
                let _ = total;
            }
        };
        let info = read(&f);
        assert!(info.errors.is_empty(), "{:?}", info.errors);
        let acc: Vec<String> = info.accumulated.iter().map(|i| i.to_string()).collect();
        assert_eq!(acc, ["total", "out"]);
        assert!(info.shared.is_empty());
    }

    #[test]
    fn the_outer_variable_is_back_after_the_shadow_ends() {
        let f: ExprForLoop = syn::parse_quote! {
            for &x in v {
                total += x;
                {
                    let total = 1;
                    let _ = total;
                }
                let total = total + 1;
                if let Some(out) = Some(x) {
                    let _ = out;
                }
                out = Vec::new();
            }
        };
        let errors: Vec<String> = read(&f).errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].starts_with("cannot assign to `out`"));
        assert!(errors[1].starts_with("`total` is accumulated into"));
    }
}
