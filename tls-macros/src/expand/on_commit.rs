//! `#[on_commit]`: the body runs when the calling epoch commits.

use super::rt::{rt, rt_at};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{ImplItemFn, parse_quote};

/// The body of an `#[on_commit]` function, delayed to commit; `closure_ret` is the
/// delayed closure's return type.
///
/// ```text
/// // Before
/// #[on_commit] fn log(line: String) { body }
/// // After
/// fn log(line: String) {
///     let line = commit_arg(line);            // Send + 'static, checked here
///     delay_call(move || -> () { let line = commit_arg_value(line); body })
/// }
/// ```
pub(super) fn delayed_block(func: &ImplItemFn, closure_ret: &TokenStream) -> syn::Block {
    let rt = rt();
    // The body's statements, not its block: a block as the closure's last
    // expression draws `unused_braces` on the user's braces.
    let body = &func.block.stmts;
    let named = named_args(&func.sig);
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
        #rt::delay_call(move || #closure_ret { #(#take)* #(#body)* })
    })
}

/// The arguments bound to a plain name (`x: T`, `mut x: T`), which move into the
/// delayed call.
fn named_args(sig: &syn::Signature) -> Vec<&syn::PatIdent> {
    sig.inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(t) => match &*t.pat {
                syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(p),
                _ => None,
            },
            syn::FnArg::Receiver(_) => None,
        })
        .collect()
}
