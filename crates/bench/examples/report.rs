//! Re-renders a report from saved rows: markdown tables on stdout, an SVG chart to a file.
//!
//!   cargo run -p runahead-bench --example report -- ROWS.json [CHART.svg]
//!
//! ROWS.json is a JSON array of `BenchRow`s (as serialized by serde).

use runahead_bench::{kind_summary, markdown_table, plot_speedups, summary_table, BenchRow};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(rows_path) = args.first() else {
        return Err("usage: report ROWS.json [CHART.svg]".into());
    };
    let rows: Vec<BenchRow> = serde_json::from_str(&std::fs::read_to_string(rows_path)?)?;
    println!("{}", markdown_table(&rows));
    println!("{}", summary_table(&kind_summary(&rows)));
    if let Some(svg) = args.get(1) {
        plot_speedups(&rows, std::path::Path::new(svg))?;
        eprintln!("wrote {svg}");
    }
    Ok(())
}
