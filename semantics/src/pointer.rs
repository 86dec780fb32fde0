//! Concrete locations in a JSON value ([`Pointer`]s of [`Segment`]s) and
//! reading, writing and removing the values at them. The path languages
//! (`paths` for RFC 9535 JSONPath, `jq` for jq paths) find locations; this
//! file only edits at them.

use serde_json::Value;

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// An object member.
    Key(String),
    /// A list position.
    Index(usize),
}

/// A concrete location in a JSON value; empty means the root.
pub type Pointer = Vec<Segment>;

/// The value at `ptr`, if there is one.
pub fn get<'a>(value: &'a Value, ptr: &[Segment]) -> Option<&'a Value> {
    ptr.iter().try_fold(value, |node, seg| match seg {
        Segment::Key(k) => node.as_object()?.get(k),
        Segment::Index(i) => node.as_array()?.get(*i),
    })
}

/// Sets the value at `ptr`, creating missing intermediate objects for `Key`
/// segments. Returns false when it cannot: an index out of range, or a
/// non-container in the way (objects created on the way are left in place).
/// An empty pointer replaces the whole value.
pub fn set(value: &mut Value, ptr: &[Segment], new: Value) -> bool {
    let Some((last, parents)) = ptr.split_last() else {
        *value = new;
        return true;
    };
    let mut node = value;
    for seg in parents {
        node = match seg {
            Segment::Key(k) => match node {
                Value::Object(map) => map
                    .entry(k.clone())
                    .or_insert_with(|| Value::Object(Default::default())),
                _ => return false,
            },
            Segment::Index(i) => match node.as_array_mut().and_then(|a| a.get_mut(*i)) {
                Some(item) => item,
                None => return false,
            },
        };
    }
    match (last, node) {
        (Segment::Key(k), Value::Object(map)) => {
            map.insert(k.clone(), new);
            true
        }
        (Segment::Index(i), Value::Array(items)) => match items.get_mut(*i) {
            Some(slot) => {
                *slot = new;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// Removes and returns the value at `ptr`; None when there is nothing there
/// (or `ptr` is the root, which cannot be removed).
pub fn remove(value: &mut Value, ptr: &[Segment]) -> Option<Value> {
    let (last, parents) = ptr.split_last()?;
    let mut node = value;
    for seg in parents {
        node = match seg {
            Segment::Key(k) => node.as_object_mut()?.get_mut(k)?,
            Segment::Index(i) => node.as_array_mut()?.get_mut(*i)?,
        };
    }
    match last {
        Segment::Key(k) => node.as_object_mut()?.remove(k),
        Segment::Index(i) => {
            let items = node.as_array_mut()?;
            (*i < items.len()).then(|| items.remove(*i))
        }
    }
}

/// Removes the given locations, highest first (see `paths::remove_all`).
pub fn remove_pointers(value: &mut Value, pointers: &mut Vec<Pointer>) {
    pointers.sort();
    pointers.dedup();
    for ptr in pointers.iter().rev() {
        remove(value, ptr);
    }
}

/// Renders a location as an RFC 9535 Normalized Path, e.g.
/// `$['spec']['containers'][0]['image']`.
pub fn normalized(ptr: &[Segment]) -> String {
    let mut out = String::from("$");
    for seg in ptr {
        match seg {
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            Segment::Key(k) => {
                out.push_str("['");
                for c in k.chars() {
                    match c {
                        '\u{8}' => out.push_str("\\b"),
                        '\u{c}' => out.push_str("\\f"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        '\'' => out.push_str("\\'"),
                        '\\' => out.push_str("\\\\"),
                        c if c < '\u{20}' => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push_str("']");
            }
        }
    }
    out
}
