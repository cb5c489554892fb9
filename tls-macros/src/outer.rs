//! The function's variables outside its epoch loops, as the accumulations see them:
//! every name it binds, the names bound `mut` (which `x.push(..)`-like statements may
//! accumulate into), and those bound to a `&mut` borrow (reborrowed).

use crate::scan::{all_bindings_in_block, pat_bindings};
use std::collections::BTreeSet;
use syn::visit::{self, Visit};
use syn::{Expr, ExprForLoop, Pat};

/// Parameters of type `&mut T` bound without `mut`, and locals outside the epoch
/// loops (`epoch_loops`) bound without `mut` to a `&mut` borrow (`let out = &mut
/// self.lines;`, `let n: &mut u64 = ..;`): accumulations reborrow `*p`. A name also
/// bound `mut` to something else outside the epoch loops is left out (it is
/// accumulated as that variable, if at all).
pub(crate) fn ref_mut_names(
    func: &syn::ImplItemFn,
    epoch_loops: &[&ExprForLoop],
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut other_muts = BTreeSet::new();
    for arg in &func.sig.inputs {
        if let syn::FnArg::Typed(t) = arg {
            match (&*t.pat, &*t.ty) {
                (Pat::Ident(p), syn::Type::Reference(r))
                    if r.mutability.is_some() && p.mutability.is_none() && p.by_ref.is_none() =>
                {
                    names.insert(p.ident.to_string());
                }
                (pat, _) => other_muts.extend(mut_bindings(pat)),
            }
        }
    }
    outside_epoch_loops(&func.block, epoch_loops, &mut |l| {
        if let Some(name) = local_ref_mut(l) {
            names.insert(name);
        } else {
            other_muts.extend(mut_bindings(&l.pat));
        }
    });
    names.retain(|n| !other_muts.contains(n));
    names
}

/// The names `pat` binds `mut`.
fn mut_bindings(pat: &Pat) -> impl Iterator<Item = String> {
    let mut b = Vec::new();
    pat_bindings(pat, &mut b);
    b.into_iter()
        .filter(|b| b.mutable)
        .map(|b| b.ident.to_string())
}

/// The name a `let` binds without `mut` to a `&mut` borrow: `let x = &mut e;` or
/// `let x: &mut T = e;`.
fn local_ref_mut(l: &syn::Local) -> Option<String> {
    let (pat, ty) = match &l.pat {
        Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
        p => (p, None),
    };
    let Pat::Ident(p) = pat else { return None };
    if p.mutability.is_some() || p.by_ref.is_some() || p.subpat.is_some() {
        return None;
    }
    let typed = matches!(ty, Some(syn::Type::Reference(r)) if r.mutability.is_some());
    let borrowed = matches!(
        l.init.as_ref().map(|i| &*i.expr),
        Some(Expr::Reference(r)) if r.mutability.is_some()
    );
    (typed || borrowed).then(|| p.ident.to_string())
}

/// Calls `f` on every `let` in `block` outside the loops of `epoch_loops` (and
/// outside nested items).
fn outside_epoch_loops(
    block: &syn::Block,
    epoch_loops: &[&ExprForLoop],
    f: &mut dyn FnMut(&syn::Local),
) {
    struct Lets<'n, 'a>(&'n mut dyn FnMut(&syn::Local), &'n [&'a ExprForLoop]);
    impl<'ast> Visit<'ast> for Lets<'_, '_> {
        fn visit_local(&mut self, l: &'ast syn::Local) {
            (self.0)(l);
            visit::visit_local(self, l);
        }
        fn visit_expr_for_loop(&mut self, e: &'ast ExprForLoop) {
            if !self.1.iter().any(|l| std::ptr::eq(*l, e)) {
                visit::visit_expr_for_loop(self, e);
            }
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    Lets(f, epoch_loops).visit_block(block);
}

/// The function's variables: parameters (and `self`) and every name its body binds.
pub(crate) fn fn_variables(func: &syn::ImplItemFn) -> BTreeSet<String> {
    let mut names = all_bindings_in_block(&func.block);
    for arg in &func.sig.inputs {
        match arg {
            syn::FnArg::Typed(t) => {
                let mut b = Vec::new();
                pat_bindings(&t.pat, &mut b);
                names.extend(b.into_iter().map(|b| b.ident.to_string()));
            }
            syn::FnArg::Receiver(_) => {
                names.insert("self".into());
            }
        }
    }
    // `None`, `Ordering::Less` and the like appear as bindings in patterns; variables
    // are lowercase.
    names.retain(|n| n.starts_with(|c: char| c.is_lowercase() || c == '_'));
    names
}

/// Names bound `mut` (or as `&mut` parameters, or without `mut` to a `&mut` borrow)
/// in the function outside its epoch loops (`epoch_loops`): the variables
/// `x.push(..)`-like statements may accumulate into. A `let mut` inside an epoch loop
/// is a local of its epochs, never one of these.
pub(crate) fn outer_mut_names(
    func: &syn::ImplItemFn,
    epoch_loops: &[&ExprForLoop],
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for arg in &func.sig.inputs {
        if let syn::FnArg::Typed(t) = arg {
            let mut b = Vec::new();
            pat_bindings(&t.pat, &mut b);
            let ref_mut = matches!(&*t.ty, syn::Type::Reference(r) if r.mutability.is_some());
            for b in b {
                if b.mutable || ref_mut {
                    names.insert(b.ident.to_string());
                }
            }
        }
    }
    outside_epoch_loops(&func.block, epoch_loops, &mut |l| {
        names.extend(mut_bindings(&l.pat));
        names.extend(local_ref_mut(l));
    });
    names
}
