//! An SVG grouped bar chart of speedups.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;

use crate::{BenchError, BenchRow};

/// Pixel sizes of the chart.
const HEIGHT: u32 = 520;
const MIN_WIDTH: u32 = 720;
const MARGIN_PX: u32 = 14;
/// Height taken by the caption (20 px font).
const CAPTION_PX: u32 = 34;
/// Width per bar and extra width per suite group.
const BAR_PX: u32 = 16;
const GROUP_GAP_PX: u32 = 28;
/// The x axis counts half bars: a bar is 2 units wide and suite groups are 2 units apart, so
/// every group centre is an integer.
const BAR_UNITS: i32 = 2;
const GAP_UNITS: i32 = 2;

/// Writes an SVG grouped bar chart to `path`: one group per suite (in order of first
/// appearance), one bar per (drafter, backend) pair with a legend entry each, the speedup on
/// the y axis, and a dashed reference line at 1.0x (no gain). Rows with a non-finite speedup
/// are drawn as missing bars.
pub fn plot_speedups(rows: &[BenchRow], path: &Path) -> Result<(), BenchError> {
    if rows.is_empty() {
        return Err(BenchError::NoRows);
    }
    draw(rows, path).map_err(|message| BenchError::Plot {
        path: path.to_owned(),
        message,
    })
}

fn draw(rows: &[BenchRow], path: &Path) -> Result<(), String> {
    let mut suites: Vec<&str> = Vec::new();
    let mut series: Vec<(&str, &str)> = Vec::new(); // (drafter, backend)
    for r in rows {
        if !suites.contains(&r.suite.as_str()) {
            suites.push(&r.suite);
        }
        if !series.contains(&(r.drafter.as_str(), r.backend.as_str())) {
            series.push((&r.drafter, &r.backend));
        }
    }
    let one_backend = series.iter().all(|(_, b)| *b == series[0].1);
    let label = |(drafter, backend): (&str, &str)| {
        if one_backend {
            format!("{drafter} ({backend})")
        } else {
            format!("{drafter} / {backend}")
        }
    };

    let m = series.len() as i32;
    let group = m * BAR_UNITS + GAP_UNITS;
    let x_end = suites.len() as i32 * group;
    let centre = |i: usize| i as i32 * group + GAP_UNITS / 2 + m * BAR_UNITS / 2;
    let width =
        (suites.len() as u32 * (series.len() as u32 * BAR_PX + GROUP_GAP_PX) + 140).max(MIN_WIDTH);
    let longest_suite = suites.iter().map(|s| s.len()).max().unwrap_or(0) as u32;
    let x_label_px = longest_suite * 6 + 36;
    // Head room for the legend (upper right) above the tallest bar.
    let plot_px = HEIGHT
        .saturating_sub(x_label_px + 2 * MARGIN_PX + CAPTION_PX)
        .max(100) as f64;
    let legend_px = ((series.len() + 1) * 17 + 24) as f64;
    let top = rows
        .iter()
        .map(|r| r.speedup)
        .filter(|s| s.is_finite())
        .fold(1.0, f64::max);
    let y_max = top * plot_px / (plot_px - legend_px).max(plot_px / 2.0);

    let root = SVGBackend::new(path, (width, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Speculative decoding: speedup over plain decoding, per suite",
            ("sans-serif", 20),
        )
        .margin(MARGIN_PX)
        .x_label_area_size(x_label_px)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (0..x_end).with_key_points((0..suites.len()).map(centre).collect()),
            0.0..y_max,
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(TRANSPARENT)
        // Suite names are drawn below, rotated, starting at the axis.
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|y| format!("{y:.1}x"))
        .x_desc("suite")
        .y_desc("speedup (x)")
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;

    let name_style = ("sans-serif", 13)
        .into_font()
        .transform(FontTransform::Rotate90)
        .into_text_style(&root)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, suite) in suites.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(centre(i), 0.0));
        root.draw(&Text::new(
            suite.to_string(),
            (x, y + 10),
            name_style.clone(),
        ))
        .map_err(|e| e.to_string())?;
    }

    for (j, &key) in series.iter().enumerate() {
        let color = Palette99::pick(j).to_rgba();
        let bars = rows
            .iter()
            .filter(|r| (r.drafter.as_str(), r.backend.as_str()) == key && r.speedup.is_finite())
            .filter_map(|r| {
                suites
                    .iter()
                    .position(|s| *s == r.suite)
                    .map(|i| (i, r.speedup))
            })
            .map(|(i, speedup)| {
                let x0 = i as i32 * group + GAP_UNITS / 2 + j as i32 * BAR_UNITS;
                Rectangle::new(
                    [(x0, 0.0), (x0 + BAR_UNITS, speedup.max(0.0))],
                    color.filled(),
                )
            });
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(label(key))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }

    let reference = [(0, 1.0), (x_end, 1.0)];
    chart
        .draw_series(std::iter::once(DashedPathElement::new(
            reference,
            6,
            4,
            BLACK.stroke_width(1),
        )))
        .map_err(|e| e.to_string())?
        .label("1.0x: no gain")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK.stroke_width(1)));

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::row;
    use crate::SuiteKind;

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("runahead-bench-{}-{name}", std::process::id()))
    }

    #[test]
    fn writes_a_well_formed_grouped_bar_chart() {
        let rows = [
            row("summarize", SuiteKind::Grounded, "cpu", "ngram", 2.5),
            row("summarize", SuiteKind::Grounded, "cpu", "suffix", 3.1),
            row("mtbench-writing", SuiteKind::Open, "cpu", "ngram", 1.1),
            row("mtbench-writing", SuiteKind::Open, "cpu", "suffix", 0.9),
            row("humaneval", SuiteKind::Code, "cpu", "ngram", f64::NAN),
            row("humaneval", SuiteKind::Code, "cpu", "suffix", 1.4),
        ];
        let path = temp_path("chart.svg");
        plot_speedups(&rows, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        for expected in [
            "summarize",
            "mtbench-writing",
            "humaneval",
            "ngram (cpu)",
            "suffix (cpu)",
            "1.0x: no gain",
            "suite",
            "speedup (x)",
        ] {
            assert!(
                texts.contains(&expected),
                "missing text {expected:?} in {texts:?}"
            );
        }
        // Bars: filled rects in the two series colours; 5 finite speedups plus 2 legend swatches.
        let fill_of = |j: usize| {
            let c = Palette99::pick(j).to_rgba();
            format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
        };
        let rects = |color: &str| {
            doc.descendants()
                .filter(|n| {
                    n.has_tag_name("rect")
                        && n.attribute("fill")
                            .is_some_and(|f| f.eq_ignore_ascii_case(color))
                })
                .count()
        };
        assert_eq!(rects(&fill_of(0)), 2 + 1, "ngram bars + swatch");
        assert_eq!(rects(&fill_of(1)), 3 + 1, "suffix bars + swatch");
    }

    #[test]
    fn multiple_backends_are_labelled_and_empty_input_is_an_error() {
        let rows = [
            row("extract", SuiteKind::Grounded, "cpu", "ngram", 2.0),
            row("extract", SuiteKind::Grounded, "gpu", "ngram", 1.5),
        ];
        let path = temp_path("backends.svg");
        plot_speedups(&rows, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(svg.contains("ngram / cpu") && svg.contains("ngram / gpu"));
        assert!(matches!(plot_speedups(&[], &path), Err(BenchError::NoRows)));
        let bad = std::path::Path::new("/nonexistent-dir/chart.svg");
        let err = plot_speedups(&rows, bad).unwrap_err();
        assert!(matches!(err, BenchError::Plot { .. }), "{err}");
    }
}
