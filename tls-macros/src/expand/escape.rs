//! `#[escape]`, `#[escape(check = f)]` and `#[on_violation(undo)]`: the body runs
//! non-speculatively, serialized with the function's other calls, after the optional
//! check, and registers the optional undo action.

use super::rt::{rt, rt_at};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{Expr, ImplItemFn, parse_quote};

/// The body of an escaped function; `closure_ret` is the escaped closure's return type.
///
/// ```text
/// // Before
/// #[escape(check = ok)] #[on_violation(undo)] fn get(pool: &Pool, id: u32) -> R { body }
/// // After
/// fn get(pool: &Pool, id: u32) -> R {
///     static LOCK: EscapeLock = EscapeLock::new();
///     if !escape_check(|| verdict((ok)(pool, &id))) { return escape_skipped(); }
///     let ret = escape(&LOCK, || -> R { body });
///     if is_speculative() { undo_with(keep_for_undo(&ret), undo_action(&ret, undo)); }
///     ret
/// }
/// ```
pub(super) fn escaped_block(
    func: &ImplItemFn,
    check: Option<Expr>,
    undo: Option<Expr>,
    closure_ret: &TokenStream,
) -> syn::Block {
    let rt = rt();
    let block = &func.block;
    let check = check.map(|check| checked_call(&func.sig, &check));
    let undo = undo.map(|undo| undo_registration(&func.sig, &undo));
    parse_quote!({
        static __TLS_ESCAPE_LOCK: #rt::EscapeLock = #rt::EscapeLock::new();
        #check
        let __tls_returned = #rt::escape(&__TLS_ESCAPE_LOCK, || #closure_ret #block);
        #undo
        __tls_returned
    })
}

/// The check of `#[escape(check = f)]`, before the escaped call.
///
/// ```text
/// // Before
/// #[escape(check = ok)] fn get(pool: &Pool, id: u32)
/// // After
/// if !escape_check(|| verdict((ok)(pool, &id))) { return escape_skipped(); }
/// ```
///
/// The check decides whether the call is made at all: refused in a destructor whose
/// attempt is being thrown away, the call is skipped (made after a check that only
/// waited, it ran with the refused arguments, the undo taking it back).
fn checked_call(sig: &syn::Signature, check: &Expr) -> TokenStream {
    let rt = rt();
    let args = check_args(sig);
    let span = syn::spanned::Spanned::span(check);
    let rt_c = rt_at(span);
    let call = quote_spanned!(span=> #rt_c::verdict((#check)(#(#args),*)));
    quote! {
        if !#rt::escape_check(|| #call) {
            return #rt::escape_skipped();
        }
    }
}

/// The undo action of `#[on_violation(undo)]`, registered after a speculative call.
///
/// ```text
/// // Before
/// #[on_violation(undo)]
/// // After
/// if is_speculative() {
///     let __tls_kept = keep_for_undo(&__tls_returned);
///     undo_with(__tls_kept, undo_action(&__tls_returned, undo));
/// }
/// ```
fn undo_registration(sig: &syn::Signature, undo: &Expr) -> TokenStream {
    let rt = rt();
    let span = syn::spanned::Spanned::span(undo);
    let rt_u = rt_at(span);
    let action = quote_spanned!(span=> #rt_u::undo_action(&__tls_returned, #undo));
    let ret_span = match &sig.output {
        syn::ReturnType::Type(_, ty) => syn::spanned::Spanned::span(ty),
        syn::ReturnType::Default => sig.ident.span(),
    };
    let rt_r = rt_at(ret_span);
    let keep = quote_spanned!(ret_span=> #rt_r::keep_for_undo(&__tls_returned));
    quote! {
        if #rt::is_speculative() {
            let __tls_kept = #keep;
            #rt::undo_with(__tls_kept, #action);
        }
    }
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
