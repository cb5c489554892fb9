//! Attribute arguments, parsed with darling after a check that names every valid
//! option when one is unknown.

use crate::symbol::{self, ESCAPE, ESCAPE_OPTIONS, LOOP_OPTIONS, ON_COMMIT, ON_VIOLATION};
use darling::FromMeta;
use darling::ast::NestedMeta;
use proc_macro2::TokenStream;

/// Options of `#[tls_loop]`, on the function or on a marked loop:
///
/// ```text
/// #[tls_loop]
/// #[tls_loop(name = "new_order.items", threads = 4, chunk = 8)]
/// #[tls_loop(site = &SITES[k])]
/// ```
///
/// `threads` takes any `usize` expression (a literal, a constant, a parameter);
/// `site` any `&'static LoopSite` expression.
#[derive(Debug, Default, Clone, FromMeta)]
pub(crate) struct LoopArgs {
    /// The loop's name in reports.
    pub(crate) name: Option<LoopName>,
    /// Threads that may run the loop's epochs, the caller included.
    pub(crate) threads: Option<ExprArg>,
    /// Iterations per epoch.
    pub(crate) chunk: Option<Chunk>,
    /// The `&'static LoopSite` that keeps the loop's adaptive state (default: one
    /// `static` per loop).
    pub(crate) site: Option<ExprArg>,
}

/// An option that takes an expression (`threads = n`, `site = &SITES[k]`).
///
/// Not a string: darling would parse `threads = "2"` as the code `2`, which no other
/// option of ours does (`name = 5` is refused).
#[derive(Debug, Clone)]
pub(crate) struct ExprArg(pub(crate) syn::Expr);

impl FromMeta for ExprArg {
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        match expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(_),
                ..
            }) => Err(darling::Error::custom(
                "expected an expression, not a string: `threads = 4`, `threads = n`",
            )
            .with_span(expr)),
            _ => Ok(ExprArg(expr.clone())),
        }
    }
    fn from_word() -> darling::Result<Self> {
        Err(darling::Error::custom(
            "this option needs a value: `threads = 4`, `site = &SITE`",
        ))
    }
    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Err(darling::Error::custom(
            "write the option with `=`: `threads = 4`, not `threads(4)`",
        ))
    }
}

impl quote::ToTokens for ExprArg {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        self.0.to_tokens(tokens)
    }
}

/// `name = "..."`.
#[derive(Debug, Clone)]
pub(crate) struct LoopName(pub(crate) String);

impl FromMeta for LoopName {
    fn from_string(value: &str) -> darling::Result<Self> {
        Ok(LoopName(value.to_owned()))
    }
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        match expr {
            syn::Expr::Lit(l) => Self::from_value(&l.lit),
            _ => Err(darling::Error::custom(
                "expected a string literal: `name = \"new_order.items\"`",
            )
            .with_span(expr)),
        }
    }
    fn from_word() -> darling::Result<Self> {
        Err(darling::Error::custom(
            "`name` needs a value: `name = \"new_order.items\"`",
        ))
    }
    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Err(darling::Error::custom(
            "write the option with `=`: `name = \"new_order.items\"`",
        ))
    }
    fn from_value(value: &syn::Lit) -> darling::Result<Self> {
        match value {
            syn::Lit::Str(s) => Ok(LoopName(s.value())),
            _ => Err(darling::Error::custom(
                "expected a string literal: `name = \"new_order.items\"`",
            )
            .with_span(value)),
        }
    }
}

/// `chunk = <int>`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunk(pub(crate) usize);

/// What `chunk` takes, for errors.
const CHUNK_FORM: &str = "expected a positive integer literal: `chunk = 8` (for a computed \
                          value, call `Loop::chunk` on a `Loop` instead)";

impl FromMeta for Chunk {
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        match expr {
            syn::Expr::Lit(l) => Self::from_value(&l.lit),
            _ => Err(darling::Error::custom(CHUNK_FORM).with_span(expr)),
        }
    }
    fn from_word() -> darling::Result<Self> {
        Err(darling::Error::custom(CHUNK_FORM))
    }
    fn from_list(_: &[NestedMeta]) -> darling::Result<Self> {
        Err(darling::Error::custom(CHUNK_FORM))
    }
    fn from_value(value: &syn::Lit) -> darling::Result<Self> {
        let err = || darling::Error::custom(CHUNK_FORM).with_span(value);
        match value {
            syn::Lit::Int(i) => match i.base10_parse::<usize>() {
                Ok(n) if n > 0 => Ok(Chunk(n)),
                _ => Err(err()),
            },
            _ => Err(err()),
        }
    }
}

impl LoopArgs {
    /// Parses the tokens inside `#[tls_loop(...)]`.
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let metas = NestedMeta::parse_meta_list(tokens)?;
        check_known(&metas, symbol::TLS_LOOP, LOOP_OPTIONS)?;
        Ok(LoopArgs::from_list(&metas)?)
    }

    /// These options, with those unset taken from `outer` (the function's attribute).
    pub(crate) fn or(self, outer: &LoopArgs) -> LoopArgs {
        LoopArgs {
            name: self.name.or_else(|| outer.name.clone()),
            threads: self.threads.or_else(|| outer.threads.clone()),
            chunk: self.chunk.or(outer.chunk),
            site: self.site.or_else(|| outer.site.clone()),
        }
    }
}

/// Options of `#[escape]`:
///
/// ```text
/// #[escape]
/// #[escape(check = path_or_closure)]
/// ```
///
/// The check is called with the escaped function's arguments by shared reference
/// (arguments that are references already are passed as they are) and returns `bool`.
#[derive(Debug, Default, Clone, FromMeta)]
pub(crate) struct EscapeArgs {
    /// Checks the arguments before a speculative call.
    pub(crate) check: Option<syn::Expr>,
}

impl EscapeArgs {
    /// Parses the tokens inside `#[escape(...)]`.
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let metas = NestedMeta::parse_meta_list(tokens)?;
        check_known(&metas, ESCAPE, ESCAPE_OPTIONS)?;
        Ok(EscapeArgs::from_list(&metas)?)
    }
}

/// The argument of `#[on_violation(undo)]`: a path or a closure, called with `&ret`.
pub(crate) fn parse_undo(
    tokens: TokenStream,
    missing: impl FnOnce() -> syn::Error,
) -> syn::Result<syn::Expr> {
    if tokens.is_empty() {
        return Err(missing());
    }
    syn::parse2(tokens)
}

/// Rejects options that are not in `valid`, listing the valid ones.
fn check_known(metas: &[NestedMeta], attr: &str, valid: &[&str]) -> syn::Result<()> {
    let mut errors: Option<syn::Error> = None;
    let mut seen: Vec<String> = Vec::new();
    for meta in metas {
        let path = match meta {
            NestedMeta::Meta(m) => m.path(),
            other => {
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        other,
                        format!(
                            "expected `option = value` in `#[{attr}(...)]`; valid options: {}",
                            symbol::list(valid)
                        ),
                    ),
                );
                continue;
            }
        };
        let known = path
            .get_ident()
            .is_some_and(|i| valid.iter().any(|v| i == v));
        if known {
            let name = path.get_ident().map(|i| i.to_string()).unwrap_or_default();
            if seen.contains(&name) {
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        path,
                        format!("duplicate `#[{attr}]` option `{name}`; remove one"),
                    ),
                );
            }
            if let NestedMeta::Meta(syn::Meta::Path(_)) = meta {
                // Every option takes a value; darling's own message for a bare word
                // names its parser, not the option.
                push(
                    &mut errors,
                    syn::Error::new_spanned(
                        path,
                        format!("`#[{attr}]` option `{name}` needs a value: `{name} = ...`"),
                    ),
                );
            }
            seen.push(name);
        } else {
            let name = path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect::<Vec<_>>()
                .join("::");
            push(
                &mut errors,
                syn::Error::new_spanned(
                    path,
                    format!(
                        "unknown `#[{attr}]` option `{name}`; valid options: {}",
                        symbol::list(valid)
                    ),
                ),
            );
        }
    }
    errors.map_or(Ok(()), Err)
}

fn push(errors: &mut Option<syn::Error>, e: syn::Error) {
    match errors {
        Some(all) => all.combine(e),
        None => *errors = Some(e),
    }
}

/// Which of the speculation attributes an attribute is, by its last path segment
/// (`escape`, `tls_runtime::escape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Escape,
    OnViolation,
    OnCommit,
}

impl Kind {
    /// The attribute's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Escape => ESCAPE,
            Kind::OnViolation => ON_VIOLATION,
            Kind::OnCommit => ON_COMMIT,
        }
    }

    /// Recognizes a sibling attribute.
    pub(crate) fn of(attr: &syn::Attribute) -> Option<Kind> {
        let last = attr.path().segments.last()?;
        [Kind::Escape, Kind::OnViolation, Kind::OnCommit]
            .into_iter()
            .find(|k| last.ident == k.name())
    }
}

/// The tokens inside an attribute's parentheses (empty for a bare attribute).
pub(crate) fn args_of(attr: &syn::Attribute) -> syn::Result<TokenStream> {
    match &attr.meta {
        syn::Meta::Path(_) => Ok(TokenStream::new()),
        syn::Meta::List(list) => Ok(list.tokens.clone()),
        syn::Meta::NameValue(nv) => Err(syn::Error::new_spanned(
            nv,
            format!(
                "expected `#[{0}]` or `#[{0}(...)]`",
                attr.path()
                    .segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default()
            ),
        )),
    }
}

/// Whether `attr` is `#[tls_loop]` (or `#[tls_runtime::tls_loop(...)]`).
pub(crate) fn is_tls_loop(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == symbol::TLS_LOOP)
}
