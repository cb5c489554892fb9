//! Printing in an epoch: `print!`-like macros, and `write!` to `stdout()` or
//! `stderr()`, formatted in the epoch and printed when it commits.

use super::rt::rt;
use crate::scan;
use crate::symbol::{PRINT_MACROS, STREAMS, Stream, WRITE_MACROS};
use proc_macro2::TokenStream;
use quote::quote;
use syn::Expr;

/// `println!(...)` and friends in an epoch body, formatted in the epoch and printed at
/// commit; `None` for any other macro, and for `write!` to anything but a standard
/// stream.
///
/// ```text
/// // Before
/// println!("{i}: {}", x);
/// writeln!(std::io::stderr(), "{x}")
/// // After
/// print_at_commit(Stream::Stdout, format!("{i}: {}", x), true);
/// write_at_commit(Stream::Stderr, format!("{x}"), true)
/// ```
pub(super) fn delayed_print(mac: &syn::Macro) -> Option<TokenStream> {
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
    let (target, rest) = split_first_arg(mac.tokens.clone())?;
    let stream = standard_stream(target)?;
    let s = stream_tokens(stream);
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

/// The stream a `write!` target is: `stdout()`, `io::stderr()`, `stdout().lock()`, ...;
/// `None` for anything else.
fn standard_stream(mut target: Expr) -> Option<Stream> {
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
    Some(*stream)
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

#[cfg(test)]
mod tests {
    use super::*;

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
