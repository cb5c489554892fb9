//! Reading a `#[tls_loop]` function without changing it: which loops run as epochs,
//! what a loop body binds and mentions, which outer variables it accumulates into,
//! which locals live across each `checkpoint!()`. `valid.rs` reports the problems
//! found here; `expand/` trusts the rest.

use crate::attr;
use crate::symbol::{self, ACCUMULATING_METHODS};
use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use std::collections::BTreeSet;
use std::ops::Range;
use syn::visit::{self, Visit};
use syn::{Expr, ExprForLoop, Macro, Pat, Stmt};

/// A name bound by a pattern.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    pub(crate) ident: Ident,
    pub(crate) mutable: bool,
}

/// The names `pat` binds, in order.
pub(crate) fn pat_bindings(pat: &Pat, out: &mut Vec<Binding>) {
    struct Collect<'o>(&'o mut Vec<Binding>);
    impl<'ast> Visit<'ast> for Collect<'_> {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.0.push(Binding {
                ident: p.ident.clone(),
                mutable: p.mutability.is_some(),
            });
            visit::visit_pat_ident(self, p);
        }
        fn visit_expr(&mut self, _: &'ast Expr) {}
    }
    Collect(out).visit_pat(pat);
}

/// Every name bound anywhere inside `node` (lets, closure parameters, match arms,
/// nested loops), not looking into nested items.
pub(crate) fn all_bindings_in_block(block: &syn::Block) -> BTreeSet<String> {
    struct Collect(BTreeSet<String>);
    impl<'ast> Visit<'ast> for Collect {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.0.insert(p.ident.to_string());
            visit::visit_pat_ident(self, p);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut c = Collect(BTreeSet::new());
    c.visit_block(block);
    c.0
}

/// The last path segment of a macro invocation (`println` for `std::println!`).
pub(crate) fn macro_name(mac: &Macro) -> Option<String> {
    mac.path.segments.last().map(|s| s.ident.to_string())
}

/// The arguments of a standard macro that takes expressions (`println!`, `assert!`,
/// ...; see [`symbol::EXPRESSION_MACROS`]) when they hold a `?` or a `return`, which
/// the loop body's rewriting must reach; `None` for any other macro or arguments.
pub(crate) fn control_flow_args(
    mac: &Macro,
) -> Option<syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>> {
    let name = macro_name(mac)?;
    if !symbol::EXPRESSION_MACROS.contains(&name.as_str()) || !has_try_or_return(&mac.tokens) {
        return None;
    }
    mac.parse_body_with(syn::punctuated::Punctuated::parse_terminated)
        .ok()
}

fn has_try_or_return(tokens: &proc_macro2::TokenStream) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        proc_macro2::TokenTree::Punct(p) => p.as_char() == '?',
        proc_macro2::TokenTree::Ident(i) => i == "return",
        proc_macro2::TokenTree::Group(g) => has_try_or_return(&g.stream()),
        proc_macro2::TokenTree::Literal(_) => false,
    })
}

/// Whether `mac` is `checkpoint!()`.
pub(crate) fn is_checkpoint(mac: &Macro) -> bool {
    macro_name(mac).as_deref() == Some(symbol::CHECKPOINT)
}

/// The `checkpoint!()` a statement is, if it is one.
pub(crate) fn checkpoint_stmt(stmt: &Stmt) -> Option<&Macro> {
    match stmt {
        Stmt::Macro(m) if is_checkpoint(&m.mac) => Some(&m.mac),
        Stmt::Expr(Expr::Macro(m), _) if is_checkpoint(&m.mac) => Some(&m.mac),
        _ => None,
    }
}

/// The statements of a loop body between its top-level checkpoints.
pub(crate) fn segments(stmts: &[Stmt]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, s) in stmts.iter().enumerate() {
        if checkpoint_stmt(s).is_some() {
            out.push(start..i);
            start = i + 1;
        }
    }
    out.push(start..stmts.len());
    out
}

/// The variable an assignment target or borrow is rooted in: `x` for `x`, `x.f`,
/// `x[i]`, `*x`, `(x)`.
pub(crate) fn root_ident(e: &Expr) -> Option<&Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        Expr::Field(f) => root_ident(&f.base),
        Expr::Index(i) => root_ident(&i.expr),
        Expr::Paren(p) => root_ident(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => root_ident(&u.expr),
        _ => None,
    }
}

/// `x` or `*x` (what a write-only `op=` accumulation may target).
pub(crate) fn plain_target(e: &Expr) -> Option<&Ident> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        Expr::Paren(p) => plain_target(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => match &*u.expr {
            Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
            _ => None,
        },
        _ => None,
    }
}

/// A field or element place as the user wrote it (`self.count`, `stats.max`,
/// `hist[..]`), for messages; `None` for other expressions.
pub(crate) fn place_text(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        Expr::Field(f) => {
            let member = match &f.member {
                syn::Member::Named(n) => n.to_string(),
                syn::Member::Unnamed(i) => i.index.to_string(),
            };
            Some(format!("{}.{member}", place_text(&f.base)?))
        }
        Expr::Index(i) => Some(format!("{}[..]", place_text(&i.expr)?)),
        Expr::Paren(p) => place_text(&p.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => place_text(&u.expr),
        _ => None,
    }
}

/// Whether a binary operator is a compound assignment (`+=`, `|=`, ...).
pub(crate) fn is_assign_op(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// The receiver of `x.push(..)`-like calls when `x` is a plain variable.
pub(crate) fn accumulating_receiver(call: &syn::ExprMethodCall) -> Option<&Ident> {
    if !ACCUMULATING_METHODS.iter().any(|m| call.method == m) {
        return None;
    }
    match &*call.receiver {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        _ => None,
    }
}

/// Names mentioned in `tokens`: identifiers, and `{name}` inside string literals
/// (inline format arguments).
pub(crate) fn token_mentions(tokens: TokenStream, out: &mut Vec<Ident>) {
    let mut after_dot = false;
    for tt in tokens {
        let dot = matches!(&tt, TokenTree::Punct(p) if p.as_char() == '.');
        match tt {
            // `v.len()`: a method or field name, not a variable.
            TokenTree::Ident(_) if after_dot => {}
            TokenTree::Ident(i) => out.push(i),
            TokenTree::Group(g) => token_mentions(g.stream(), out),
            TokenTree::Literal(lit) => format_mentions(&lit.to_string(), lit.span(), out),
            TokenTree::Punct(_) => {}
        }
        after_dot = dot;
    }
}

fn format_mentions(lit: &str, span: Span, out: &mut Vec<Ident>) {
    if !lit.starts_with('"') && !lit.starts_with('r') {
        return;
    }
    let bytes = lit.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'{' {
            if bytes.get(i + 1) == Some(&b'{') {
                i += 2;
                continue;
            }
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
                end += 1;
            }
            let name = &lit[start..end];
            let ident_like = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if ident_like && name != "_" {
                out.push(Ident::new(name, span));
            }
            i = end;
        } else {
            i += 1;
        }
    }
}

/// How a `#[tls_loop]` function picks its epoch loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Some loops carry an inner `#[tls_loop]`: those (the outermost ones) run as epochs.
    Marked,
    /// No marks: the function's one outermost `for` loop runs as epochs.
    Single,
}

/// Whether `attrs` hold an inner `#[tls_loop]`.
pub(crate) fn marked(attrs: &[syn::Attribute]) -> Option<&syn::Attribute> {
    attrs.iter().find(|a| attr::is_tls_loop(a))
}

/// Finds the epoch loops of a function body (not looking into closures, async blocks
/// or nested items, whose `return` would not be the function's).
pub(crate) struct Finder<'a> {
    pub(crate) mode: Mode,
    /// The epoch loops, in source order.
    pub(crate) selected: Vec<&'a ExprForLoop>,
    /// `#[tls_loop]` on a `while` or `loop` (the keyword).
    pub(crate) bad_marks: Vec<(&'a syn::Attribute, &'static str)>,
    /// `checkpoint!()` outside every epoch loop.
    pub(crate) stray_checkpoints: Vec<&'a Macro>,
}

impl<'a> Finder<'a> {
    /// Reads `block`.
    pub(crate) fn find(block: &'a syn::Block) -> Finder<'a> {
        let mode = if has_marks(block) {
            Mode::Marked
        } else {
            Mode::Single
        };
        let mut f = Finder {
            mode,
            selected: Vec::new(),
            bad_marks: Vec::new(),
            stray_checkpoints: Vec::new(),
        };
        f.visit_block(block);
        f
    }
}

/// Whether any loop in `block` (outside closures and items) is marked.
pub(crate) fn has_marks(block: &syn::Block) -> bool {
    struct Any(bool);
    impl<'ast> Visit<'ast> for Any {
        fn visit_expr_for_loop(&mut self, e: &'ast ExprForLoop) {
            self.0 |= marked(&e.attrs).is_some();
            visit::visit_expr_for_loop(self, e);
        }
        fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
            self.0 |= marked(&e.attrs).is_some();
            visit::visit_expr_while(self, e);
        }
        fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
            self.0 |= marked(&e.attrs).is_some();
            visit::visit_expr_loop(self, e);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut a = Any(false);
    a.visit_block(block);
    a.0
}

impl<'a> Visit<'a> for Finder<'a> {
    fn visit_expr_for_loop(&mut self, e: &'a ExprForLoop) {
        let select = match self.mode {
            Mode::Marked => marked(&e.attrs).is_some(),
            Mode::Single => true,
        };
        if select {
            self.selected.push(e);
        } else {
            visit::visit_expr_for_loop(self, e);
        }
    }
    fn visit_expr_while(&mut self, e: &'a syn::ExprWhile) {
        if let Some(a) = marked(&e.attrs) {
            self.bad_marks.push((a, "while"));
        }
        visit::visit_expr_while(self, e);
    }
    fn visit_expr_loop(&mut self, e: &'a syn::ExprLoop) {
        if let Some(a) = marked(&e.attrs) {
            self.bad_marks.push((a, "loop"));
        }
        visit::visit_expr_loop(self, e);
    }
    fn visit_macro(&mut self, m: &'a Macro) {
        if is_checkpoint(m) {
            self.stray_checkpoints.push(m);
        }
    }
    fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
    fn visit_expr_async(&mut self, _: &'a syn::ExprAsync) {}
    fn visit_item(&mut self, _: &'a syn::Item) {}
}

/// The calls in `block` that start threads, with how to name each: a call whose path
/// ends in one of [`symbol::THREAD_STARTS`], or `spawn` / `spawn_scoped` on a
/// `thread::Builder::new()` chain. Closures count (they may run in the epoch), except
/// the arguments of [`symbol::NON_SPECULATIVE_CALLS`] and of `tls_runtime::scope`
/// (`on_commit(|| ..)` and `when_homefree(|| ..)` are where a thread may start);
/// nested items do not (they are not the loop's code). This reads syntax only: a start
/// behind a `use` of the bare name, inside a macro's arguments, or in a function the
/// body calls is not seen.
pub(crate) fn thread_starts(block: &syn::Block) -> Vec<(&Expr, String)> {
    fn path_names(p: &syn::Path) -> Vec<String> {
        p.segments.iter().map(|s| s.ident.to_string()).collect()
    }
    fn ends_in(names: &[String], a: &str, b: &str) -> bool {
        matches!(names, [.., x, y] if x == a && y == b)
    }
    struct Find<'a>(Vec<(&'a Expr, String)>);
    impl<'a> Visit<'a> for Find<'a> {
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Call(c) => {
                    if let Expr::Path(p) = &*c.func {
                        let names = path_names(&p.path);
                        if symbol::THREAD_STARTS
                            .iter()
                            .any(|(a, b)| ends_in(&names, a, b))
                        {
                            self.0.push((&c.func, names.join("::")));
                        }
                        let (a, b) = symbol::RUNTIME_SCOPE;
                        if names
                            .last()
                            .is_some_and(|n| symbol::NON_SPECULATIVE_CALLS.contains(&n.as_str()))
                            || ends_in(&names, a, b)
                        {
                            return;
                        }
                    }
                }
                Expr::MethodCall(m) if m.method == "spawn" || m.method == "spawn_scoped" => {
                    let mut root = &*m.receiver;
                    while let Expr::MethodCall(inner) = root {
                        root = &inner.receiver;
                    }
                    if let Expr::Call(c) = root
                        && let Expr::Path(p) = &*c.func
                        && ends_in(&path_names(&p.path), "Builder", "new")
                    {
                        self.0.push((e, format!("thread::Builder::{}", m.method)));
                    }
                }
                _ => {}
            }
            visit::visit_expr(self, e);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut f = Find(Vec::new());
    f.visit_block(block);
    f.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scopes::{carried, free_mentions};
    use quote::quote;

    fn names(ids: &[Ident]) -> Vec<String> {
        ids.iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn inline_format_arguments_are_mentions() {
        let mut out = Vec::new();
        token_mentions(quote!("{a} {{b}} {c:>4} {} {0}", d, e.len()), &mut out);
        assert_eq!(names(&out), ["a", "c", "d", "e"]);
    }

    #[test]
    fn locals_live_across_a_checkpoint_are_carried() {
        let f: ExprForLoop = syn::parse_quote! {
            for (i, x) in xs {
                let mut a = f(x);
                let b = g(i);
                let unused = 3;
                checkpoint!();
                a += b;
                checkpoint!();
                println!("{a}");
            }
        };
        let carried = carried(&f);
        assert_eq!(carried.len(), 2);
        let first: Vec<(String, bool)> = carried[0]
            .iter()
            .map(|b| (b.ident.to_string(), b.mutable))
            .collect();
        assert_eq!(first, [("a".into(), true), ("b".into(), false)]);
        assert_eq!(
            names(
                &carried[1]
                    .iter()
                    .map(|b| b.ident.clone())
                    .collect::<Vec<_>>()
            ),
            ["a"]
        );
    }

    #[test]
    fn free_mentions_skip_names_bound_in_scope() {
        let b: syn::Block = syn::parse_quote!({
            let a = b + c;
            {
                let b = 1;
                let _ = b;
            }
            let f = |c| c + d;
            match e {
                Some(e) => e,
                None => g,
            }
            if let Some(h) = h {
                h
            } else {
                i + h
            }
            for j in j {
                j;
            }
            {
                k();
                fn k() {}
            }
            println!("{a} {l}");
        });
        assert_eq!(
            names(&free_mentions(&b.stmts)),
            ["b", "c", "d", "e", "g", "h", "i", "h", "j", "l"]
        );
    }

    #[test]
    fn a_local_shadowed_after_a_checkpoint_is_not_carried() {
        let f: ExprForLoop = syn::parse_quote! {
            for x in xs {
                let guard = lock(x);
                let total = x;
                checkpoint!();
                { let guard = 1; let _ = guard; }
                let _ = total;
            }
        };
        let carried = carried(&f);
        let first: Vec<Ident> = carried[0].iter().map(|b| b.ident.clone()).collect();
        assert_eq!(names(&first), ["total"]);
    }

    #[test]
    fn the_single_outermost_for_loop_is_selected() {
        let block: syn::Block = syn::parse_quote!({
            let c = || for _ in 0..1 {};
            while go() {
                for x in xs {
                    for y in ys {}
                }
            }
        });
        let f = Finder::find(&block);
        assert_eq!(f.mode, Mode::Single);
        assert_eq!(f.selected.len(), 1);
    }

    #[test]
    fn write_targets_are_plain_variables() {
        let e: Expr = syn::parse_quote!(*total);
        assert_eq!(
            plain_target(&e).map(|i| i.to_string()),
            Some("total".into())
        );
        let e: Expr = syn::parse_quote!(s.total);
        assert_eq!(plain_target(&e), None);
        assert_eq!(root_ident(&e).map(|i| i.to_string()), Some("s".into()));
    }
}
