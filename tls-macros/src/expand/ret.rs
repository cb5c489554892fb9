//! The return type written on generated closures: the function's own where it can be
//! repeated inside the body, inferred where it cannot.

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::ImplItemFn;

/// What `return` in an epoch returns, for the step closure's type.
#[derive(Clone)]
pub(super) enum RetKind {
    /// `fn f()`: returns `()`.
    Unit,
    /// A return type that can be written inside the body.
    Named(Box<syn::Type>),
    /// `impl Trait` or elided lifetimes: left to inference.
    Infer,
}

impl RetKind {
    pub(super) fn of(func: &ImplItemFn) -> RetKind {
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

    pub(super) fn tokens(&self) -> TokenStream {
        match self {
            RetKind::Unit => quote!(()),
            RetKind::Named(t) => quote!(#t),
            RetKind::Infer => quote!(_),
        }
    }
}

/// The return type of the closure that wraps an escaped or delayed body.
///
/// ```text
/// // Before
/// fn f() -> R { body }        fn g() { body }        fn h() -> impl Trait { body }
/// // After
/// || -> R { body }            || -> () { body }      || { body }
/// ```
pub(super) fn closure_ret(func: &ImplItemFn) -> TokenStream {
    match &func.sig.output {
        syn::ReturnType::Type(_, ty) if nameable(ty.to_token_stream()) => quote!(-> #ty),
        syn::ReturnType::Default => quote!(-> ()),
        _ => quote!(),
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
}
