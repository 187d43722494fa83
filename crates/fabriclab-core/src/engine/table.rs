//! Result tables an application returns after a run: named columns, so that
//! the results writer and the Python binding never name an application type.

#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    U32(Vec<u32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    /// Nullable (e.g. an end time of something unfinished).
    OptU64(Vec<Option<u64>>),
    F64(Vec<f64>),
    Str(Vec<String>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::U32(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::OptU64(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Appends `other`'s values (same kind; a mismatch is a programming error).
    pub fn extend(&mut self, other: Column) {
        match (self, other) {
            (Column::U32(a), Column::U32(b)) => a.extend(b),
            (Column::U64(a), Column::U64(b)) => a.extend(b),
            (Column::I64(a), Column::I64(b)) => a.extend(b),
            (Column::OptU64(a), Column::OptU64(b)) => a.extend(b),
            (Column::F64(a), Column::F64(b)) => a.extend(b),
            (Column::Str(a), Column::Str(b)) => a.extend(b),
            (a, b) => panic!("column kinds differ: {a:?} vs {b:?}"),
        }
    }
}

/// A named table of equally long columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub name: String,
    pub columns: Vec<(String, Column)>,
}

impl Table {
    pub fn new(name: &str) -> Table {
        Table {
            name: name.to_string(),
            columns: Vec::new(),
        }
    }
    pub fn col(mut self, name: &str, c: Column) -> Table {
        debug_assert!(
            self.columns.first().is_none_or(|(_, f)| f.len() == c.len()),
            "ragged table {}",
            self.name
        );
        self.columns.push((name.to_string(), c));
        self
    }
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }
}

/// Concatenates tables of the same name (every app of a kind gives rows of
/// one table), keeping first-seen order of names and columns.
pub fn merge_tables(tables: Vec<Table>) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    for t in tables {
        match out.iter_mut().find(|o| o.name == t.name) {
            Some(o) => {
                for ((n0, c0), (n1, c1)) in o.columns.iter_mut().zip(t.columns) {
                    assert_eq!(*n0, n1, "table {} columns differ", o.name);
                    c0.extend(c1);
                }
            }
            None => out.push(t),
        }
    }
    out
}
