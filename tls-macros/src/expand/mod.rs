//! Code generation. Every entry point reads as the pipeline parse -> validate ->
//! generate; generation raises no errors (validation already reported them). On error
//! the user's item is emitted as written, plus the errors, so later diagnostics and the
//! IDE stay sane.
//!
//! By what it generates:
//! - `epoch_loop.rs`: `#[tls_loop]`, each epoch loop -> a `Loop` of epochs and its
//!   step closure;
//! - `body.rs`: one segment of an epoch body (control flow, accumulations, polls),
//!   with `print.rs` for the prints delayed to commit;
//! - `escape.rs`: `#[escape]` / `#[on_violation]`;
//! - `on_commit.rs`: `#[on_commit]`;
//! - `ret.rs`, `rt.rs`: return types of generated closures, the runtime's path.

mod body;
mod epoch_loop;
mod escape;
mod on_commit;
mod print;
mod ret;
mod rt;

use crate::ast::{LoopFn, SpecFn, SpecPlan};
use crate::attr::{self, Kind};
use crate::scan;
use crate::symbol::CONSUMED;
use crate::valid;
use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ImplItemFn, parse_quote};

/// `#[tls_loop(args)] item`.
pub(crate) fn tls_loop(args: TokenStream, item: TokenStream) -> TokenStream {
    let f = match LoopFn::parse(args, item.clone()) {
        Ok(f) => f,
        Err(e) => return fallback(item, e),
    };
    match valid::tls_loop(&f) {
        Ok(plans) => epoch_loop::loop_fn(f, plans),
        Err(e) => {
            let mut func = f.func;
            Unmark.visit_block_mut(&mut func.block);
            fallback(func.into_token_stream(), e)
        }
    }
}

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
        // The body's statements after the items, not its block: a block as the
        // last expression draws `unused_braces` on the user's braces.
        let body = &func.block.stmts;
        func.block = parse_quote!({ #(#consumed)* #(#body)* });
    }
    func
}

/// The function with its body delayed to commit (`#[on_commit]`) or escaped
/// (`#[escape]`, `#[on_violation]`).
fn spec_body(mut func: ImplItemFn, plan: SpecPlan) -> TokenStream {
    let closure_ret = ret::closure_ret(&func);
    func.block = if plan.on_commit {
        on_commit::delayed_block(&func, &closure_ret)
    } else {
        let check = plan.escape.unwrap_or_default().check;
        escape::escaped_block(&func, check, plan.undo, &closure_ret)
    };
    func.into_token_stream()
}
