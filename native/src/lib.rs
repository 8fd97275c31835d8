//! Avro binary -> Python values, for lineagewire's event schemas, with fastavro's values (same values, same
//! types; an exception on any malformed input, which the Codec then reads with fastavro for the error).
//! Written by hand because no maintained library decodes Avro into Python dicts faster than fastavro, which
//! made decoding the largest cost of every consumer service (issue 13).
//!
//! `schemas/_native.py` walks the schema and the fields to keep (raising ValueError for a field the schema
//! lacks, NotImplementedError for a type this does not read) and hands over a plan: nested tuples, one per value, that `compile`
//! turns into a tree of `Node`s. A `Reader` interprets that tree per call. Records that contain themselves
//! are listed once (`recursive`) and referred to by index (`Node::Ref`).
//!
//! Safety: no `unsafe`; every byte is read through `slice::get`, and the position only grows by checked or
//! saturating additions, so a malformed body ends in a `ValueError` (the Codec then asks fastavro, which
//! words the error) and never in a read out of bounds or a crash.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

/// Deeper nesting of recursive records than this is refused (Python's reader stops near 1000 frames).
const MAX_DEPTH: u32 = 500;
const MICROS_PER_DAY: i64 = 86_400_000_000;

enum Node {
    Null,
    Boolean,
    Long, // int and long: zig-zag varints
    Str,
    Bytes,
    Timestamp, // timestamp-micros -> datetime in UTC
    Enum(Vec<Py<PyString>>),
    Array(Box<Node>),
    Map(Box<Node>),
    Union(Vec<Node>),
    /// (field name, or None to step over the field without building it; its value), and a dict of the
    /// names kept, each to None: copied for each value, it is made at its size and in the schema's order
    /// at once (a dict grown one key at a time is resized as it grows; that was a fifth of the time)
    Record(Vec<(Option<Py<PyString>>, Node)>, Py<PyDict>),
    /// a recursive record, by its index in `Reader::recursive`
    Ref(usize),
}

fn malformed(pos: usize, what: &str) -> PyErr {
    PyValueError::new_err(format!("malformed Avro body at byte {pos}: {what}"))
}

/// The bytes and the position of the next one to read. `pos` may pass the end after a value is stepped
/// over without reading it; the next read, or the final check, then fails.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    #[inline]
    fn byte(&mut self) -> PyResult<u8> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or_else(|| malformed(self.pos, "the data ends"))?;
        self.pos += 1;
        Ok(b)
    }

    /// A union's branch, from its index: one byte, as every union of ours has fewer than 64 branches.
    #[inline]
    fn branch<'n>(&mut self, branches: &'n [Node]) -> PyResult<&'n Node> {
        let i = self.byte()?;
        let branch = if i & 1 == 0 {
            branches.get(usize::from(i >> 1))
        } else {
            None
        };
        branch.ok_or_else(|| malformed(self.pos - 1, "a union index out of range"))
    }

    /// A zig-zag varint of at most 64 bits.
    #[inline]
    fn long(&mut self) -> PyResult<i64> {
        let mut b = self.byte()?;
        if b < 0x80 {
            return Ok(i64::from(b >> 1) ^ -i64::from(b & 1));
        }
        let mut x = u64::from(b & 0x7f);
        let mut shift = 7;
        loop {
            b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(malformed(self.pos - 1, "a varint of more than 64 bits"));
            }
            x |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(((x >> 1) as i64) ^ -((x & 1) as i64));
            }
            shift += 7;
        }
    }

    /// A non-negative length or size.
    fn size(&mut self) -> PyResult<usize> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| malformed(self.pos, "a negative length"))
    }

    /// The bytes of a string or bytes value.
    fn chunk(&mut self) -> PyResult<&[u8]> {
        let n = self.size()?;
        let start = self.pos;
        let end = start.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| malformed(start, "a length past the end of the data"))?;
        self.pos = end;
        Ok(&self.data[start..end])
    }

    /// The item count of the next array or map block (0 ends) and, for a negative count, the block's byte
    /// size (unchecked: a reader reads the items and ignores it, as fastavro does). A count above the bytes
    /// left is refused, also for items that take no byte (an array of nulls): no count makes a loop of 2^63.
    fn block(&mut self) -> PyResult<(u64, Option<i64>)> {
        let count = self.long()?;
        let size = if count < 0 { Some(self.long()?) } else { None };
        let count = count.unsigned_abs();
        let left = self.data.len().saturating_sub(self.pos) as u64;
        if count > left {
            return Err(malformed(self.pos, "more items than bytes left"));
        }
        Ok((count, size))
    }
}

#[pyclass(frozen, module = "lineagewire.schemas._avro")]
struct Reader {
    root: Node,
    recursive: Vec<Node>,
    datetime: Py<PyAny>,
    utc: Py<PyAny>,
}

#[pymethods]
impl Reader {
    /// (data, position) -> (value, position after it).
    fn __call__<'py>(&self, py: Python<'py>, data: &[u8], pos: usize) -> PyResult<(Bound<'py, PyAny>, usize)> {
        let mut input = Input { data, pos };
        let value = self.read(py, &self.root, &mut input, 0)?;
        if input.pos > data.len() {
            return Err(malformed(data.len(), "the data ends inside a value stepped over"));
        }
        Ok((value, input.pos))
    }
}

impl Reader {
    fn read<'py>(&self, py: Python<'py>, node: &Node, input: &mut Input, depth: u32) -> PyResult<Bound<'py, PyAny>> {
        Ok(match node {
            Node::Null => py.None().into_bound(py),
            Node::Boolean => PyBool::new(py, input.byte()? != 0).to_owned().into_any(),
            Node::Long => input.long()?.into_pyobject(py)?.into_any(),
            Node::Str => PyString::from_bytes(py, input.chunk()?)?.into_any(),
            Node::Bytes => PyBytes::new(py, input.chunk()?).into_any(),
            Node::Timestamp => self.timestamp(py, input)?,
            Node::Enum(symbols) => {
                let i = input.byte()?;
                let symbol = if i & 0x81 == 0 {
                    symbols.get(usize::from(i >> 1))
                } else {
                    None
                };
                symbol
                    .ok_or_else(|| malformed(input.pos - 1, "an enum index out of range"))?
                    .bind(py)
                    .clone()
                    .into_any()
            }
            Node::Union(branches) => self.read(py, input.branch(branches)?, input, depth)?,
            Node::Record(fields, template) => {
                let dict = template.bind(py).copy()?;
                for (name, field) in fields {
                    match name {
                        Some(name) => dict.set_item(name.bind(py), self.read(py, field, input, depth)?)?,
                        None => self.skip(field, input, depth)?,
                    }
                }
                dict.into_any()
            }
            Node::Ref(i) => self.read(py, self.recursive_record(*i, input, depth)?, input, depth + 1)?,
            Node::Array(item) => {
                let mut items = Vec::new(); // then a list of the right size at once
                loop {
                    let (count, _) = input.block()?;
                    if count == 0 {
                        break PyList::new(py, items)?.into_any();
                    }
                    items.reserve(count as usize); // count <= the bytes left (block)
                    for _ in 0..count {
                        items.push(self.read(py, item, input, depth)?);
                    }
                }
            }
            Node::Map(value) => {
                let dict = PyDict::new(py);
                loop {
                    let (count, _) = input.block()?;
                    if count == 0 {
                        break dict.into_any();
                    }
                    for _ in 0..count {
                        let key = PyString::from_bytes(py, input.chunk()?)?;
                        dict.set_item(key, self.read(py, value, input, depth)?)?;
                    }
                }
            }
        })
    }

    /// Steps over one value, building nothing.
    fn skip(&self, node: &Node, input: &mut Input, depth: u32) -> PyResult<()> {
        match node {
            Node::Null => {}
            Node::Boolean => input.pos = input.pos.saturating_add(1),
            Node::Long | Node::Timestamp | Node::Enum(_) => {
                input.long()?;
            }
            Node::Str | Node::Bytes => {
                let n = input.size()?;
                input.pos = input.pos.saturating_add(n);
            }
            Node::Union(branches) => self.skip(input.branch(branches)?, input, depth)?,
            Node::Record(fields, _) => {
                for (_, field) in fields {
                    self.skip(field, input, depth)?;
                }
            }
            Node::Ref(i) => self.skip(self.recursive_record(*i, input, depth)?, input, depth + 1)?,
            Node::Array(item) | Node::Map(item) => loop {
                match input.block()? {
                    (0, _) => break,
                    (_, Some(size)) => {
                        let size = usize::try_from(size).map_err(|_| malformed(input.pos, "a negative block size"))?;
                        input.pos = input.pos.saturating_add(size); // the block's bytes, stepped over at once
                    }
                    (count, None) => {
                        for _ in 0..count {
                            if let Node::Map(_) = node {
                                let n = input.size()?; // the key
                                input.pos = input.pos.saturating_add(n);
                            }
                            self.skip(item, input, depth)?;
                        }
                    }
                }
            },
        }
        Ok(())
    }

    fn recursive_record(&self, i: usize, input: &Input, depth: u32) -> PyResult<&Node> {
        if depth >= MAX_DEPTH {
            return Err(malformed(input.pos, "records nested too deep"));
        }
        Ok(&self.recursive[i])
    }

    /// Microseconds since the epoch -> an aware datetime in UTC (`_EPOCH + timedelta(microseconds=n)`).
    fn timestamp<'py>(&self, py: Python<'py>, input: &mut Input) -> PyResult<Bound<'py, PyAny>> {
        let at = input.pos;
        let n = input.long()?;
        let (days, micros) = (n.div_euclid(MICROS_PER_DAY), n.rem_euclid(MICROS_PER_DAY));
        let (year, month, day) = civil_from_days(days);
        if !(1..=9999).contains(&year) {
            return Err(malformed(at, "a timestamp outside the years 1 to 9999"));
        }
        let secs = micros / 1_000_000;
        let args = (
            year,
            month,
            day,
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            micros % 1_000_000,
            self.utc.bind(py),
        );
        self.datetime.bind(py).call1(args)
    }
}

/// Days since 1970-01-01 -> (year, month, day) in the proleptic Gregorian calendar (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// One node of the plan: `("long",)`, `("enum", symbols)`, `("array", item)`, `("map", value)`,
/// `("union", branches)`, `("record", ((name or None, plan), ...))`, `("ref", index)`; also `null`,
/// `boolean`, `string`, `bytes`, `timestamp`.
fn node(plan: &Bound<'_, PyAny>) -> PyResult<Node> {
    let py = plan.py();
    let plan = plan.cast::<PyTuple>()?;
    let tag: String = plan.get_item(0)?.extract()?;
    let arg = || plan.get_item(1);
    Ok(match tag.as_str() {
        "null" => Node::Null,
        "boolean" => Node::Boolean,
        "long" => Node::Long,
        "string" => Node::Str,
        "bytes" => Node::Bytes,
        "timestamp" => Node::Timestamp,
        "enum" => Node::Enum(
            arg()?
                .try_iter()?
                .map(|s| Ok(PyString::intern(py, &s?.extract::<String>()?).unbind()))
                .collect::<PyResult<_>>()?,
        ),
        "array" => Node::Array(Box::new(node(&arg()?)?)),
        "map" => Node::Map(Box::new(node(&arg()?)?)),
        "union" => Node::Union(arg()?.try_iter()?.map(|b| node(&b?)).collect::<PyResult<_>>()?),
        "record" => {
            let fields: Vec<(Option<Py<PyString>>, Node)> = arg()?
                .try_iter()?
                .map(|field| {
                    let (name, plan): (Option<String>, Bound<'_, PyAny>) = field?.extract()?;
                    Ok((name.map(|n| PyString::intern(py, &n).unbind()), node(&plan)?))
                })
                .collect::<PyResult<_>>()?;
            let template = PyDict::new(py);
            for name in fields.iter().filter_map(|(name, _)| name.as_ref()) {
                template.set_item(name.bind(py), py.None())?;
            }
            Node::Record(fields, template.unbind())
        }
        "ref" => Node::Ref(arg()?.extract()?),
        other => return Err(PyValueError::new_err(format!("no plan node {other:?}"))),
    })
}

/// The reader of `plan`, whose `("ref", i)` nodes are the records `recursive[i]`; timestamps are made by
/// `datetime(y, m, d, H, M, S, us, utc)`.
#[pyfunction]
fn compile(
    plan: &Bound<'_, PyAny>,
    recursive: &Bound<'_, PyAny>,
    datetime: Py<PyAny>,
    utc: Py<PyAny>,
) -> PyResult<Reader> {
    let recursive: Vec<Node> = recursive.try_iter()?.map(|r| node(&r?)).collect::<PyResult<_>>()?;
    let root = node(plan)?;
    let count = recursive.len();
    let refs_ok = |n: &Node| !matches!(n, Node::Ref(i) if *i >= count);
    if !all_nodes(&root, &refs_ok) || !recursive.iter().all(|r| all_nodes(r, &refs_ok)) {
        return Err(PyValueError::new_err(
            "a plan refers to a recursive record it does not list",
        ));
    }
    Ok(Reader {
        root,
        recursive,
        datetime,
        utc,
    })
}

fn all_nodes(node: &Node, ok: &dyn Fn(&Node) -> bool) -> bool {
    ok(node)
        && match node {
            Node::Array(item) | Node::Map(item) => all_nodes(item, ok),
            Node::Union(branches) => branches.iter().all(|b| all_nodes(b, ok)),
            Node::Record(fields, _) => fields.iter().all(|(_, f)| all_nodes(f, ok)),
            _ => true,
        }
}

#[pymodule]
mod _avro {
    #[pymodule_export]
    use super::{compile, Reader};
}
