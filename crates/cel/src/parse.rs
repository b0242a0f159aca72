//! Parsing with the `cel` crate, bounded so that no expression can exhaust the
//! stack, and cel-go's issue formatting.

use std::collections::BTreeMap;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};
use cel::parser::Parser;

use crate::{CompileError, EXPRESSION_SIZE_CODE_POINT_LIMIT, MAX_RECURSION_DEPTH};

/// Node id → (line, 0-based column) of where it was written.
pub(crate) type Offsets = BTreeMap<u64, (usize, usize)>;

/// cel-go's issue text: `ERROR: <input>:L:C: msg`, the source line and a
/// caret under the column.
pub(crate) fn issue(src: &str, pos: Option<(usize, usize)>, msg: &str) -> String {
    let Some((line, col)) = pos else {
        return format!("ERROR: <input>:-1:0: {msg}");
    };
    let mut s = format!("ERROR: <input>:{line}:{}: {msg}", col + 1);
    if let Some(snippet) = src.lines().nth(line.saturating_sub(1)) {
        s.push_str("\n | ");
        s.push_str(&snippet.replace('\t', " "));
        s.push_str("\n | ");
        s.push_str(&".".repeat(col.min(snippet.chars().count())));
        s.push('^');
    }
    s
}

fn line_col(src: &str, char_offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut col = 0;
    for c in src.chars().take(char_offset) {
        if c == '\n' {
            line += 1;
            col = 0;
        } else {
            col += 1;
        }
    }
    (line, col)
}

/// An upper bound of the AST depth the source can produce, from its tokens:
/// operators and selections nest left to right, brackets nest, while `&&`
/// and `||` chains are balanced by the parser.
fn estimated_depth(src: &str) -> usize {
    // One frame per bracket level: (depth at entry, operators so far at this
    // level, balanced-operator count at this level).
    let mut stack: Vec<(usize, usize, usize)> = vec![(0, 0, 0)];
    let mut max = 0usize;
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                // Skip string literals (triple-quoted ones end at the same quote).
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    }
                }
            }
            '(' | '[' | '{' => {
                let (base, ops, bal) = stack.last().copied().unwrap_or_default();
                let here = base + ops + log2(bal) + 1;
                stack.push((here, 0, 0));
                max = max.max(here);
            }
            ')' | ']' | '}' if stack.len() > 1 => {
                stack.pop();
            }
            '&' | '|' | ',' | '?' | ':' => {
                if let Some(top) = stack.last_mut() {
                    if matches!(c, '&' | '|') && chars.peek() == Some(&c) {
                        chars.next();
                    }
                    top.1 = 0;
                    top.2 += 1;
                }
            }
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '.' => {
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                    max = max.max(top.0 + top.1 + log2(top.2));
                }
            }
            _ => {}
        }
    }
    max
}

fn log2(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()) as usize
}

fn ast_depth(e: &IdedExpr) -> usize {
    let mut max = 0;
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        max = max.max(d);
        let d = d + 1;
        match &e.expr {
            Expr::Select(s) => stack.push((&s.operand, d)),
            Expr::Call(c) => {
                if let Some(t) = c.target.as_deref() {
                    stack.push((t, d));
                }
                stack.extend(c.args.iter().map(|a| (a, d)));
            }
            Expr::List(l) => stack.extend(l.elements.iter().map(|a| (a, d))),
            Expr::Map(m) => {
                for en in &m.entries {
                    if let EntryExpr::MapEntry(me) = &en.expr {
                        stack.push((&me.key, d));
                        stack.push((&me.value, d));
                    }
                }
            }
            Expr::Struct(s) => {
                for en in &s.entries {
                    if let EntryExpr::StructField(f) = &en.expr {
                        stack.push((&f.value, d));
                    }
                }
            }
            Expr::Comprehension(c) => {
                for x in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    stack.push((x, d));
                }
            }
            Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
        }
    }
    max
}

fn collect_offsets(src: &str, e: &IdedExpr, info: &cel::common::ast::SourceInfo) -> Offsets {
    let mut out = Offsets::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        if let Some((start, _)) = info.offset_for(e.id) {
            out.insert(e.id, line_col(src, start as usize));
        }
        match &e.expr {
            Expr::Select(s) => stack.push(&s.operand),
            Expr::Call(c) => {
                stack.extend(c.target.as_deref());
                stack.extend(&c.args);
            }
            Expr::List(l) => stack.extend(&l.elements),
            Expr::Map(m) => {
                for en in &m.entries {
                    if let EntryExpr::MapEntry(me) = &en.expr {
                        stack.push(&me.key);
                        stack.push(&me.value);
                    }
                }
            }
            Expr::Comprehension(c) => stack.extend([
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]),
            _ => {}
        }
    }
    out
}

pub(crate) fn parse(src: &str) -> Result<(IdedExpr, Offsets), CompileError> {
    let size = src.chars().count();
    if size > EXPRESSION_SIZE_CODE_POINT_LIMIT {
        return Err(CompileError {
            message: format!(
                "compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {EXPRESSION_SIZE_CODE_POINT_LIMIT}"
            ),
        });
    }
    let too_deep = || CompileError {
        message: "compilation failed: ".to_string()
            + &issue(
                src,
                Some((1, 0)),
                &format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"),
            ),
    };
    // The parser and everything after it recurse on the nesting: refuse what
    // could be deeper than upstream's limit before parsing at all.
    if estimated_depth(src) > MAX_RECURSION_DEPTH {
        return Err(too_deep());
    }
    let parser = Parser::new()
        .enable_optional_syntax(true)
        .max_recursion_depth(MAX_RECURSION_DEPTH as u16);
    match parser.parse_with_source_info(src) {
        Ok((expr, info)) => {
            if ast_depth(&expr) > 2 * MAX_RECURSION_DEPTH {
                return Err(too_deep());
            }
            let offsets = collect_offsets(src, &expr, &info);
            Ok((expr, offsets))
        }
        Err(errs) => {
            let issues: Vec<String> = errs
                .errors
                .iter()
                .map(|e| {
                    let pos =
                        (e.pos.0 > 0).then(|| (e.pos.0 as usize, (e.pos.1.max(1) - 1) as usize));
                    issue(src, pos, &e.msg)
                })
                .collect();
            Err(CompileError {
                message: format!("compilation failed: {}", issues.join("\n")),
            })
        }
    }
}
