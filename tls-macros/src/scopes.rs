//! Scopes inside a loop body: which names a point of the body binds itself, so that a
//! local shadowing a variable of the function is never taken for it (not carried, not
//! accumulated into, not reported as an assignment to an outer variable).

use crate::scan::{Binding, pat_bindings, segments, token_mentions};
use proc_macro2::Ident;
use std::collections::BTreeSet;
use syn::visit::{self, Visit};
use syn::{ExprForLoop, Macro, Pat, Stmt};

/// The `Visit` methods every walk of a loop body shares, for a visitor with a
/// `scopes: Scopes` field: blocks, match arms, closures, `if let` and `while let` open a
/// scope and bind their names in it. (`let` and nested `for` differ per visitor: some
/// look into the patterns too.)
macro_rules! scoped_walk {
    () => {
        fn visit_block(&mut self, b: &'ast ::syn::Block) {
            self.scopes.push();
            self.scopes.bind_items(&b.stmts);
            ::syn::visit::visit_block(self, b);
            self.scopes.pop();
        }
        fn visit_arm(&mut self, a: &'ast ::syn::Arm) {
            self.scopes.push();
            self.scopes.bind(&a.pat);
            ::syn::visit::visit_arm(self, a);
            self.scopes.pop();
        }
        fn visit_expr_closure(&mut self, c: &'ast ::syn::ExprClosure) {
            self.scopes.push();
            for p in &c.inputs {
                self.scopes.bind(p);
            }
            ::syn::visit::visit_expr_closure(self, c);
            self.scopes.pop();
        }
        fn visit_expr_if(&mut self, e: &'ast ::syn::ExprIf) {
            // `if let` (and let chains) bind in the condition and the `then` block only.
            self.scopes.push();
            self.visit_expr(&e.cond);
            self.visit_block(&e.then_branch);
            self.scopes.pop();
            if let Some((_, els)) = &e.else_branch {
                self.visit_expr(els);
            }
        }
        fn visit_expr_while(&mut self, e: &'ast ::syn::ExprWhile) {
            self.scopes.push();
            self.visit_expr(&e.cond);
            self.visit_block(&e.body);
            self.scopes.pop();
        }
    };
}
pub(crate) use scoped_walk;

/// The names bound at a point of a loop body, one frame per enclosing block, arm,
/// closure, `if let`/`while let` or nested `for`: what shadows a variable of the
/// function there. A name is bound from its binding to the end of its frame (an item,
/// `fn`/`const`/`static`, for its whole block).
#[derive(Debug, Clone)]
pub(crate) struct Scopes {
    frames: Vec<Vec<String>>,
}

impl Scopes {
    /// The scope at the start of the epoch loop's body: its pattern's bindings and the
    /// body's items, then the top-level `let`s of `stmts[..upto]` (the segments before
    /// the one that starts at `upto`).
    pub(crate) fn loop_body(pat: &Pat, stmts: &[Stmt], upto: usize) -> Scopes {
        let mut s = Scopes {
            frames: vec![Vec::new()],
        };
        s.bind(pat);
        s.bind_items(stmts);
        for st in &stmts[..upto] {
            if let Stmt::Local(l) = st {
                s.bind(&l.pat);
            }
        }
        s
    }

    /// An empty scope (for statements read on their own).
    pub(crate) fn empty() -> Scopes {
        Scopes {
            frames: vec![Vec::new()],
        }
    }

    /// Enters a block, arm, closure, ...
    pub(crate) fn push(&mut self) {
        self.frames.push(Vec::new());
    }

    /// Leaves it: its bindings end.
    pub(crate) fn pop(&mut self) {
        self.frames.pop();
    }

    /// The names `pat` binds, from here to the end of the current frame.
    pub(crate) fn bind(&mut self, pat: &Pat) {
        let mut b = Vec::new();
        pat_bindings(pat, &mut b);
        if let Some(frame) = self.frames.last_mut() {
            frame.extend(b.into_iter().map(|b| b.ident.to_string()));
        }
    }

    /// The value items (`fn`, `const`, `static`) of a block, which name their values in
    /// the whole block.
    pub(crate) fn bind_items(&mut self, stmts: &[Stmt]) {
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        for s in stmts {
            match s {
                Stmt::Item(syn::Item::Fn(f)) => frame.push(f.sig.ident.to_string()),
                Stmt::Item(syn::Item::Const(c)) => frame.push(c.ident.to_string()),
                Stmt::Item(syn::Item::Static(st)) => frame.push(st.ident.to_string()),
                _ => {}
            }
        }
    }

    /// Whether `name` is bound here (so it is not the function's variable of that name).
    pub(crate) fn binds(&self, name: &Ident) -> bool {
        self.frames.iter().flatten().any(|n| name == n)
    }
}

/// The names mentioned in `stmts` that are not bound there first, in expressions and in
/// macro arguments: the locals of earlier statements that these read.
pub(crate) fn free_mentions(stmts: &[Stmt]) -> Vec<Ident> {
    struct Collect {
        scopes: Scopes,
        out: Vec<Ident>,
    }
    impl Collect {
        fn mention(&mut self, i: &Ident) {
            if !self.scopes.binds(i) {
                self.out.push(i.clone());
            }
        }
    }
    impl<'ast> Visit<'ast> for Collect {
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            if let (None, Some(i)) = (&p.qself, p.path.get_ident()) {
                self.mention(i);
            }
            visit::visit_expr_path(self, p);
        }
        fn visit_macro(&mut self, m: &'ast Macro) {
            let mut names = Vec::new();
            token_mentions(m.tokens.clone(), &mut names);
            for n in &names {
                self.mention(n);
            }
        }
        scoped_walk!();
        fn visit_local(&mut self, l: &'ast syn::Local) {
            // The initializer and `else` block first: the new names are not bound there.
            if let Some(init) = &l.init {
                self.visit_expr(&init.expr);
                if let Some((_, diverge)) = &init.diverge {
                    self.visit_expr(diverge);
                }
            }
            self.scopes.bind(&l.pat);
        }
        fn visit_expr_for_loop(&mut self, e: &'ast ExprForLoop) {
            self.visit_expr(&e.expr);
            self.scopes.push();
            self.scopes.bind(&e.pat);
            self.visit_block(&e.body);
            self.scopes.pop();
        }
        fn visit_expr_let(&mut self, e: &'ast syn::ExprLet) {
            self.visit_expr(&e.expr);
            self.scopes.bind(&e.pat);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut c = Collect {
        scopes: Scopes::empty(),
        out: Vec::new(),
    };
    c.scopes.bind_items(stmts);
    for s in stmts {
        c.visit_stmt(s);
    }
    c.out
}

/// Locals carried across each top-level checkpoint of a loop body: for checkpoint `k`
/// (from 1), the loop-pattern bindings and top-level `let` bindings of segments before
/// it that are mentioned after it.
pub(crate) fn carried(f: &ExprForLoop) -> Vec<Vec<Binding>> {
    let stmts = &f.body.stmts;
    let segs = segments(stmts);
    let mut out = Vec::new();
    for k in 1..segs.len() {
        let mut bound = Vec::new();
        pat_bindings(&f.pat, &mut bound);
        for seg in &segs[..k] {
            for s in &stmts[seg.clone()] {
                if let Stmt::Local(l) = s {
                    pat_bindings(&l.pat, &mut bound);
                }
            }
        }
        let used: BTreeSet<String> = free_mentions(&stmts[segs[k].start..])
            .iter()
            .map(|i| i.to_string())
            .collect();
        // Keep the last binding of each name, in order of first appearance.
        let mut names: Vec<Binding> = Vec::new();
        for b in bound {
            if !used.contains(&b.ident.to_string()) {
                continue;
            }
            match names.iter_mut().find(|n| n.ident == b.ident) {
                Some(n) => *n = b,
                None => names.push(b),
            }
        }
        out.push(names);
    }
    out
}
