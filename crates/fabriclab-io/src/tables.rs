//! The core's tables as files (columns in docs/scenario.md, "Outputs"):
//! `flows.parquet`, `links.parquet`, `messages.parquet`, `queues.parquet`
//! and `classes.parquet`, as Arrow record batches encoded as Parquet
//! (snappy, as pyarrow's default) with the Arrow schema embedded, so that
//! pyarrow and pandas read the same types back (uint32, uint8, bool, ...).

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
    UInt8Array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use fabriclab_core::engine::{Column, Table};
use fabriclab_core::results::{FlowColumns, LinkColumns};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::stats::{fct_of, slowdown_of, utilization};

fn schema(fields: &[(&str, DataType)]) -> Arc<Schema> {
    // Every column nullable, as pyarrow's schemas of these tables were.
    Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t)| Field::new(*n, t.clone(), true))
            .collect::<Vec<_>>(),
    ))
}

fn u32s(v: &[u32]) -> ArrayRef {
    Arc::new(UInt32Array::from(v.to_vec()))
}

fn u64s(v: &[u64]) -> ArrayRef {
    Arc::new(UInt64Array::from(v.to_vec()))
}

fn strings(v: &[String]) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

/// One row per flow; `end_ps`, `fct_ps` and `slowdown` null where the flow did not finish.
pub fn flows_batch(c: &FlowColumns) -> Result<RecordBatch, ArrowError> {
    use DataType::*;
    let fct: Vec<Option<u64>> = c
        .start_ps
        .iter()
        .zip(&c.end_ps)
        .map(|(&s, &e)| fct_of(s, e))
        .collect();
    let slowdown: Float64Array = fct
        .iter()
        .zip(&c.ideal_fct_ps)
        .map(|(f, &ideal)| f.map(|f| slowdown_of(f, ideal)))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        u32s(&c.flow_id),
        u32s(&c.src),
        u32s(&c.dst),
        u64s(&c.size_bytes),
        Arc::new(UInt8Array::from(c.class.clone())),
        strings(&c.tag),
        u64s(&c.start_ps),
        Arc::new(UInt64Array::from(c.end_ps.clone())),
        Arc::new(UInt64Array::from(fct)),
        u64s(&c.ideal_fct_ps),
        Arc::new(slowdown),
        u64s(&c.retransmits),
    ];
    let fields = [
        ("flow_id", UInt32),
        ("src", UInt32),
        ("dst", UInt32),
        ("size_bytes", UInt64),
        ("class", UInt8),
        ("tag", Utf8),
        ("start_ps", UInt64),
        ("end_ps", UInt64),
        ("fct_ps", UInt64),
        ("ideal_fct_ps", UInt64),
        ("slowdown", Float64),
        ("retransmits", UInt64),
    ];
    RecordBatch::try_new(schema(&fields), columns)
}

/// One row per direction of each link; utilization over `duration_ps`.
pub fn links_batch(c: &LinkColumns, duration_ps: u64) -> Result<RecordBatch, ArrowError> {
    use DataType::*;
    let util: Float64Array = c
        .bytes
        .iter()
        .zip(&c.rate_bps)
        .map(|(&b, &r)| utilization(b, r, duration_ps))
        .collect::<Vec<_>>()
        .into();
    let columns: Vec<ArrayRef> = vec![
        u32s(&c.link_id),
        strings(&c.from),
        strings(&c.to),
        u64s(&c.rate_bps),
        u64s(&c.bytes),
        u64s(&c.packets),
        Arc::new(util),
        u64s(&c.drops),
        u64s(&c.ecn_marks),
        u64s(&c.max_queue_bytes),
        Arc::new(Float64Array::from(c.mean_queue_bytes.clone())),
        u64s(&c.pause_frames_sent),
        u64s(&c.paused_ps),
    ];
    let fields = [
        ("link_id", UInt32),
        ("src_node", Utf8),
        ("dst_node", Utf8),
        ("rate_bps", UInt64),
        ("bytes", UInt64),
        ("packets", UInt64),
        ("utilization", Float64),
        ("drops", UInt64),
        ("ecn_marks", UInt64),
        ("max_queue_bytes", UInt64),
        ("mean_queue_bytes", Float64),
        ("pause_frames_sent", UInt64),
        ("paused_ps", UInt64),
    ];
    RecordBatch::try_new(schema(&fields), columns)
}

/// A core column as an Arrow array of type `to`: U32 columns also become
/// UInt8 (classes, bands: refused above 255) and Boolean (non-zero is true).
fn column_array(name: &str, c: &Column, to: &DataType) -> Result<ArrayRef, String> {
    Ok(match (c, to) {
        (Column::U32(v), DataType::UInt32) => u32s(v),
        (Column::U32(v), DataType::UInt8) => Arc::new(
            v.iter()
                .map(|&x| u8::try_from(x).map_err(|_| format!("{name}: {x} does not fit uint8")))
                .collect::<Result<Vec<u8>, String>>()
                .map(UInt8Array::from)?,
        ),
        (Column::U32(v), DataType::Boolean) => {
            Arc::new(v.iter().map(|&x| Some(x != 0)).collect::<BooleanArray>())
        }
        (Column::U64(v), DataType::UInt64) => u64s(v),
        (Column::OptU64(v), DataType::UInt64) => Arc::new(UInt64Array::from(v.clone())),
        (Column::F64(v), DataType::Float64) => Arc::new(Float64Array::from(v.clone())),
        (Column::Str(v), DataType::Utf8) => strings(v),
        _ => return Err(format!("{name}: this column cannot become {to}")),
    })
}

/// The columns of `t` named in `fields`, in that order and of those types.
pub fn table_batch(t: &Table, fields: &[(&str, DataType)]) -> Result<RecordBatch, String> {
    let columns = fields
        .iter()
        .map(|(name, to)| {
            let (_, c) = t
                .columns
                .iter()
                .find(|(n, _)| n == name)
                .ok_or_else(|| format!("table {}: no column {name}", t.name))?;
            column_array(name, c, to)
        })
        .collect::<Result<Vec<_>, String>>()?;
    RecordBatch::try_new(schema(fields), columns).map_err(|e| e.to_string())
}

fn opt_u64s<'a>(t: &'a Table, name: &str) -> Option<&'a [Option<u64>]> {
    t.columns
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, c)| match c {
            Column::OptU64(v) => Some(v.as_slice()),
            _ => None,
        })
}

/// messages.parquet from the core's message table, with fct_ps = end_ps -
/// start_ps (null while unfinished).
pub fn messages_batch(t: &Table) -> Result<RecordBatch, String> {
    use DataType::*;
    let start = match t.columns.iter().find(|(n, _)| n == "start_ps") {
        Some((_, Column::U64(v))) => v.as_slice(),
        _ => return Err("messages: no start_ps column".into()),
    };
    let end = opt_u64s(t, "end_ps").ok_or("messages: no end_ps column")?;
    let fct = start.iter().zip(end).map(|(&s, &e)| fct_of(s, e)).collect();
    let t = Table {
        name: t.name.clone(),
        columns: t.columns.clone(),
    }
    .col("fct_ps", Column::OptU64(fct));
    table_batch(
        &t,
        &[
            ("msg_id", UInt32),
            ("app", Utf8),
            ("tag", UInt64),
            ("src", UInt32),
            ("dst", UInt32),
            ("src_node", Utf8),
            ("dst_node", Utf8),
            ("size_bytes", UInt64),
            ("class", UInt8),
            ("start_ps", UInt64),
            ("first_byte_ps", UInt64),
            ("end_ps", UInt64),
            ("fct_ps", UInt64),
            ("retransmits", UInt64),
            ("cnps", UInt64),
            ("path", Utf8),
            ("reroutes", UInt32),
            ("route_lost", Boolean),
        ],
    )
}

/// queues.parquet from the core's queue samples.
pub fn queues_batch(t: &Table) -> Result<RecordBatch, String> {
    use DataType::*;
    table_batch(
        t,
        &[
            ("time_ps", UInt64),
            ("link_id", UInt32),
            ("src_node", Utf8),
            ("dst_node", Utf8),
            ("band", UInt8),
            ("queue_bytes", UInt64),
            ("tx_bytes", UInt64),
            ("drops", UInt64),
            ("ecn_marks", UInt64),
            ("paused", Boolean),
        ],
    )
}

/// classes.parquet from the core's per-class port samples.
pub fn classes_batch(t: &Table) -> Result<RecordBatch, String> {
    use DataType::*;
    table_batch(
        t,
        &[
            ("time_ps", UInt64),
            ("link_id", UInt32),
            ("src_node", Utf8),
            ("dst_node", Utf8),
            ("class", UInt8),
            ("tx_bytes", UInt64),
        ],
    )
}

/// The batch as the bytes of a Parquet file.
pub fn parquet_bytes(batch: &RecordBatch) -> Result<Vec<u8>, String> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut w =
        ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).map_err(|e| e.to_string())?;
    w.write(batch).map_err(|e| e.to_string())?;
    w.close().map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn core_columns_become_the_named_types() {
        let t = Table::new("t")
            .col("band", Column::U32(vec![0, 7]))
            .col("paused", Column::U32(vec![0, 2]))
            .col("start_ps", Column::U64(vec![10, 20]))
            .col("end_ps", Column::OptU64(vec![Some(15), None]));
        let b = table_batch(
            &t,
            &[("paused", DataType::Boolean), ("band", DataType::UInt8)],
        )
        .unwrap();
        assert_eq!(b.schema().field(0).name(), "paused");
        let paused = b.column(0).as_any().downcast_ref::<BooleanArray>().unwrap();
        assert_eq!((paused.value(0), paused.value(1)), (false, true));
        let wide = Table::new("t").col("band", Column::U32(vec![256]));
        assert_eq!(
            table_batch(&wide, &[("band", DataType::UInt8)]).unwrap_err(),
            "band: 256 does not fit uint8"
        );
        assert!(table_batch(&t, &[("nope", DataType::UInt8)])
            .unwrap_err()
            .contains("no column nope"));
        assert!(table_batch(&t, &[("start_ps", DataType::Utf8)]).is_err());
    }

    #[test]
    fn unfinished_flows_have_null_end_fct_and_slowdown() {
        let c = FlowColumns {
            flow_id: vec![0, 1],
            src: vec![0, 1],
            dst: vec![1, 0],
            size_bytes: vec![1000, 2000],
            class: vec![0, 2],
            start_ps: vec![100, 200],
            end_ps: vec![Some(600), None],
            ideal_fct_ps: vec![250, 300],
            retransmits: vec![0, 1],
            tag: vec!["a".into(), "b".into()],
        };
        let b = flows_batch(&c).unwrap();
        assert_eq!(b.num_rows(), 2);
        let fct = b
            .column_by_name("fct_ps")
            .unwrap()
            .as_any()
            .downcast_ref::<UInt64Array>()
            .unwrap();
        assert_eq!((fct.value(0), fct.is_null(1)), (500, true));
        let slow = b
            .column_by_name("slowdown")
            .unwrap()
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!((slow.value(0), slow.is_null(1)), (2.0, true));
        assert!(b.column_by_name("end_ps").unwrap().is_null(1));
        // A Parquet file: "PAR1" at both ends.
        let bytes = parquet_bytes(&b).unwrap();
        assert_eq!(
            (&bytes[..4], &bytes[bytes.len() - 4..]),
            (&b"PAR1"[..], &b"PAR1"[..])
        );
    }
}
