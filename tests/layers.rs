//! The layers of `src/` (see the crate docs in src/lib.rs): every import
//! between top-level modules points down, and no top-level modules import
//! each other around a loop.
//!
//! Imports are read from the source: every `crate::<module>` path (in `use`
//! lines, brace groups and inline paths), every `super::` chain that climbs
//! out of its folder, and `rostrum::<module>` in main.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer, lowest first. A module may
/// import its own layer (without a loop) and the layers below.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("protocol", 0),
    ("engine", 1),
    ("scripting", 2),
    ("state", 3),
    ("commands", 4),
    ("persistence", 5),
    ("server", 6),
    ("main", 7),
];

/// One import found: from which file, to which top-level module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    from_top: String,
    to_top: String,
    file: String,
    line: usize,
}

/// The module path of a file under `src/` (`src/a/b/mod.rs` -> [a, b],
/// `src/a/b.rs` -> [a, b], `src/main.rs` -> [main]).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" {
            parts.push(stem);
        }
    }
    parts
}

/// The code of a line without its `//` comment.
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn ident_at(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level modules named by one file's text. `module` is the file's
/// module path; `crate_name` the prefix that names the crate root (`crate`,
/// or `rostrum` in the binary).
fn imports_of(text: &str, module: &[String], crate_name: &str, file: &str) -> Vec<Import> {
    let from_top = module.first().cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut push = |to: String, line: usize| {
        if !to.is_empty() && to != from_top && to != "self" && to != "super" {
            out.push(Import {
                from_top: from_top.clone(),
                to_top: to,
                file: file.to_string(),
                line,
            });
        }
    };
    // Brace groups may span lines: join the code, keeping line starts.
    let mut code = String::new();
    let mut starts = Vec::new();
    for line in text.lines() {
        starts.push(code.len());
        code.push_str(code_of(line));
        code.push('\n');
    }
    let line_at = |pos: usize| starts.partition_point(|&s| s <= pos);
    let root = format!("{crate_name}::");
    let mut from = 0;
    while let Some(i) = code[from..].find(&root) {
        let pos = from + i;
        from = pos + root.len();
        let before = code[..pos].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e}}`: the first segment of each item.
            let mut depth = 0;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        item_start = false;
                        push(ident_at(&group[k..]), line_at(pos));
                    }
                    _ => {}
                }
            }
        } else {
            push(ident_at(rest), line_at(pos));
        }
    }
    // `super::super::x` climbing to the crate root names top-level `x`;
    // inside an inline `mod x { ... }` one more `super` is needed.
    let inline = inline_mod_depths(&code);
    let mut from = 0;
    while let Some(i) = code[from..].find("super::") {
        let pos = from + i;
        let before = code[..pos].chars().next_back();
        let mut rest = &code[pos..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        from = pos + ("super::".len() * ups);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        // A file's own module is its path; `super` is its parent.
        if ups >= module.len() + inline(pos) {
            push(ident_at(rest), line_at(pos));
        }
    }
    out
}

/// For each position of `code`, how many inline `mod x { ... }` blocks
/// enclose it.
fn inline_mod_depths(code: &str) -> impl Fn(usize) -> usize {
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // (position, depth from there on)
    let mut changes = vec![(0usize, 0usize)];
    let mut braces = 0usize;
    let mut open: Vec<usize> = Vec::new();
    let mut pending = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'm' && code[i..].starts_with("mod ") && (i == 0 || !is_ident(bytes[i - 1])) {
            let mut j = i + 4;
            while j < bytes.len() && is_ident(bytes[j]) {
                j += 1;
            }
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            pending = j < bytes.len() && bytes[j] == b'{';
        }
        match b {
            b'{' => {
                braces += 1;
                if pending {
                    pending = false;
                    open.push(braces);
                    changes.push((i, open.len()));
                }
            }
            b'}' => {
                if open.last() == Some(&braces) {
                    open.pop();
                    changes.push((i, open.len()));
                }
                braces = braces.saturating_sub(1);
            }
            b';' => pending = false,
            _ => {}
        }
        i += 1;
    }
    move |pos| {
        let k = changes.partition_point(|&(p, _)| p <= pos);
        changes[k.saturating_sub(1)].1
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every cross-module import of `src/`.
fn src_imports() -> Vec<Import> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut all = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src");
        if rel == Path::new("lib.rs") {
            continue; // declares the modules
        }
        let text = std::fs::read_to_string(&f).expect("readable source");
        let module = module_path(rel);
        let name = rel.display().to_string();
        let crate_name = if rel == Path::new("main.rs") {
            "rostrum"
        } else {
            "crate"
        };
        all.extend(imports_of(&text, &module, crate_name, &name));
    }
    all
}

/// What is wrong with these imports: modules missing from [`LAYERS`],
/// imports that point up, and loops between top-level modules.
fn violations(imports: &[Import], layers: &[(&str, u32)]) -> Vec<String> {
    let layer: BTreeMap<&str, u32> = layers.iter().copied().collect();
    let mut bad = Vec::new();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for imp in imports {
        for m in [&imp.from_top, &imp.to_top] {
            if !layer.contains_key(m.as_str()) {
                bad.push(format!(
                    "{}:{}: module `{m}` has no layer in tests/layers.rs",
                    imp.file, imp.line
                ));
            }
        }
        if let (Some(a), Some(b)) = (
            layer.get(imp.from_top.as_str()),
            layer.get(imp.to_top.as_str()),
        ) {
            if b > a {
                bad.push(format!(
                    "{}:{}: `{}` (layer {a}) imports `{}` (layer {b}), a higher layer",
                    imp.file, imp.line, imp.from_top, imp.to_top
                ));
            }
        }
        graph
            .entry(imp.from_top.as_str())
            .or_default()
            .insert(imp.to_top.as_str());
    }
    // Loops: a module that reaches itself.
    for &start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Vec<&str>> = vec![vec![start]];
        while let Some(path) = stack.pop() {
            let Some(&last) = path.last() else { continue };
            for &next in graph.get(last).into_iter().flatten() {
                if next == start {
                    let mut cycle = path.clone();
                    cycle.push(next);
                    // Report each loop once, from its smallest module.
                    if path.iter().all(|m| *m >= start) {
                        bad.push(format!("import loop: {}", cycle.join(" -> ")));
                    }
                } else if seen.insert(next) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push(p);
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

#[test]
fn imports_point_down_and_never_loop() {
    let imports = src_imports();
    assert!(
        imports
            .iter()
            .any(|i| i.from_top == "commands" && i.to_top == "engine"),
        "the reader found no commands -> engine import: it is broken"
    );
    let bad = violations(&imports, LAYERS);
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let known: BTreeSet<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&src).expect("src/").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let m = name.trim_end_matches(".rs");
        if m != "lib" && !known.contains(m) {
            missing.push(m.to_string());
        }
    }
    assert!(missing.is_empty(), "no layer for: {missing:?}");
}

#[test]
fn the_reader_sees_every_form_of_import() {
    let text = "use crate::engine::Value;\n\
                use crate::{protocol::Reply, error::CmdError};\n\
                use crate::{\n    server::x,\n    commands::{a, b},\n};\n\
                fn f() { crate::persistence::feed(); }\n\
                // use crate::main; (a comment)\n\
                use super::super::state::Server;\n\
                use super::sibling;\n\
                mod tests {\n    use super::super::args;\n    use super::super::super::engine::x;\n}\n";
    let module = vec!["commands".to_string(), "zset".to_string()];
    let found: BTreeSet<String> = imports_of(text, &module, "crate", "x.rs")
        .into_iter()
        .map(|i| i.to_top)
        .collect();
    let want: BTreeSet<String> = [
        "engine",
        "protocol",
        "error",
        "server",
        "persistence",
        "state",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(found, want);
}

#[test]
fn upward_imports_and_loops_are_reported() {
    let imp = |from: &str, to: &str| Import {
        from_top: from.into(),
        to_top: to.into(),
        file: format!("{from}.rs"),
        line: 1,
    };
    assert!(violations(&[imp("commands", "engine")], LAYERS).is_empty());
    let up = violations(&[imp("engine", "commands")], LAYERS);
    assert_eq!(up.len(), 1, "{up:?}");
    let layers = &[("a", 0), ("b", 0), ("c", 0)];
    let looped = violations(&[imp("a", "b"), imp("b", "c"), imp("c", "a")], layers);
    assert_eq!(looped, vec!["import loop: a -> b -> c -> a".to_string()]);
    let unknown = violations(&[imp("commands", "newthing")], LAYERS);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
}
