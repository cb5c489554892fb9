//! The items the attributes apply to, parsed.

use crate::attr::{self, EscapeArgs, Kind, LoopArgs};
use proc_macro2::{Span, TokenStream};
use syn::ImplItemFn;

/// A function or method with `#[tls_loop]`.
pub(crate) struct LoopFn {
    pub(crate) args: LoopArgs,
    pub(crate) func: ImplItemFn,
}

/// Parses a function or method (free, in an `impl`, or a trait method with a body).
pub(crate) fn parse_fn(item: TokenStream, attr: &str) -> syn::Result<ImplItemFn> {
    syn::parse2::<ImplItemFn>(item.clone()).map_err(|_| {
        let what = match syn::parse2::<syn::Item>(item.clone()) {
            Ok(item) => quote::quote!(#item),
            Err(_) => item,
        };
        let first = what.into_iter().next();
        let msg = format!("`#[{attr}]` can only be applied to a function or method with a body");
        match first {
            Some(tt) => syn::Error::new(tt.span(), msg),
            None => syn::Error::new(Span::call_site(), msg),
        }
    })
}

impl LoopFn {
    /// Parses `#[tls_loop(args)] item`.
    pub(crate) fn parse(args: TokenStream, item: TokenStream) -> syn::Result<LoopFn> {
        let func = parse_fn(item, crate::symbol::TLS_LOOP)?;
        let args = LoopArgs::parse(args)?;
        Ok(LoopFn { args, func })
    }
}

/// One speculation attribute on a function: the one being expanded or a sibling.
pub(crate) struct SpecAttr {
    pub(crate) kind: Kind,
    /// The attribute itself, when it is a sibling (for spans); the one being expanded
    /// has only the call site.
    pub(crate) attr: Option<syn::Attribute>,
    pub(crate) args: TokenStream,
}

impl SpecAttr {
    /// An error pointing at the whole attribute (the call site for the attribute
    /// being expanded, which rustc reports on that attribute).
    pub(crate) fn error(&self, msg: impl std::fmt::Display) -> syn::Error {
        match &self.attr {
            Some(a) => syn::Error::new_spanned(a, msg),
            None => syn::Error::new(Span::call_site(), msg),
        }
    }
}

/// A function with `#[escape]`, `#[on_violation]` and/or `#[on_commit]`, all of its
/// speculation attributes gathered (whichever of them expands first handles them all).
pub(crate) struct SpecFn {
    pub(crate) attrs: Vec<SpecAttr>,
    pub(crate) func: ImplItemFn,
}

/// The speculation attributes, parsed and checked by `valid.rs`.
pub(crate) struct SpecPlan {
    pub(crate) escape: Option<EscapeArgs>,
    pub(crate) undo: Option<syn::Expr>,
    pub(crate) on_commit: bool,
}

impl SpecFn {
    /// Parses `#[kind(args)] item`, taking the sibling speculation attributes off the
    /// item.
    pub(crate) fn parse(kind: Kind, args: TokenStream, item: TokenStream) -> syn::Result<SpecFn> {
        let mut func = parse_fn(item, kind.name())?;
        let mut attrs = vec![SpecAttr {
            kind,
            attr: None,
            args,
        }];
        let mut kept = Vec::new();
        for a in std::mem::take(&mut func.attrs) {
            match Kind::of(&a) {
                Some(k) => attrs.push(SpecAttr {
                    kind: k,
                    args: attr::args_of(&a)?,
                    attr: Some(a),
                }),
                None => kept.push(a),
            }
        }
        func.attrs = kept;
        Ok(SpecFn { attrs, func })
    }
}
