//! The core's layers import only downward (docs/architecture.md): every
//! `crate::<module>` a source file names must be its own top module or one
//! of a lower layer. Modules of one layer (net and apps) do not import each other.

use std::path::Path;

/// Layer of each top module of the crate; lower numbers are lower layers.
const LAYERS: &[(&str, u8)] = &[
    ("time", 0),
    ("event", 0),
    ("fabric", 1),
    ("transport", 1),
    ("engine", 2),
    ("net", 3),
    ("apps", 3),
    ("scenario", 4),
    ("results", 4),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every module named after `crate::` in `text`.
fn crate_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + 7..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
        rest = after;
    }
    out
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" {
            continue;
        }
        let own = layer(&top).unwrap_or_else(|| {
            panic!(
                "{} is in no layer: add it to LAYERS and docs/architecture.md",
                rel.display()
            )
        });
        let text = std::fs::read_to_string(f).unwrap();
        for m in crate_refs(&text) {
            if m == top {
                continue;
            }
            match layer(&m) {
                Some(l) if l < own => {}
                _ => bad.push(format!(
                    "{} (layer {own}) imports crate::{m}",
                    rel.display()
                )),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "upward or sideways imports:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    assert_eq!(
        crate_refs("use crate::engine::Api; x = crate::apps::job::KIND;"),
        ["engine", "apps"]
    );
}
