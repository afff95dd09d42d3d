//! B2: hand-off latency between two clients, with notifications on and off (and on, in
//! the weaker mode `Durability::MasterOnly`), and its plot.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cluster_rwlock::config::DEFAULT_DURABILITY;
use cluster_rwlock::{Durability, LockConfig};

use super::common::{pct, Bench, BoxError};

pub(crate) async fn b2(b: &mut Bench) -> Result<HashMap<bool, Vec<f64>>, BoxError> {
    let mut all = HashMap::new();
    // (notifications, durability): the default both ways, and the weaker mode
    let runs = [
        (true, DEFAULT_DURABILITY, ""),
        (false, DEFAULT_DURABILITY, ""),
        (true, Durability::MasterOnly, ", master-only"),
    ];
    for (notifications, durability, mode) in runs {
        let prefix = format!("b2-{notifications}{mode}");
        let tune = |c: LockConfig| c.notifications(notifications).durability(durability);
        let a = b.client(&prefix, tune).await?;
        let bb = b.client(&prefix, tune).await?;
        let locks = [a.rwlock("handoff")?, bb.rwlock("handoff")?];
        locks[0].write().await?.release().await?; // warm-up grant
        let mut holder = locks[0].write().await?;
        let mut latencies = Vec::new();
        for i in 0..b.count(200) {
            let waiter = locks[(i + 1) % 2].clone();
            let task = tokio::spawn(async move {
                let g = waiter.write().await;
                (Instant::now(), g)
            });
            tokio::time::sleep(Duration::from_millis(5)).await;
            let t0 = Instant::now();
            holder.release().await?;
            let (t1, g) = task.await?;
            holder = g?;
            latencies.push((t1 - t0).as_secs_f64() * 1000.0);
        }
        holder.release().await?;
        latencies.sort_by(f64::total_cmp);
        let tag = format!("{}{mode}", if notifications { "on" } else { "off" });
        let target = |t: &str| {
            if notifications && mode.is_empty() {
                t.to_string()
            } else {
                String::new()
            }
        };
        b.report(
            "B2",
            &format!("hand-off p50, notifications {tag}"),
            pct(&latencies, 50.0),
            "ms",
            &target("<= 0.5"),
        );
        b.report(
            "B2",
            &format!("hand-off p90, notifications {tag}"),
            pct(&latencies, 90.0),
            "ms",
            "",
        );
        b.report(
            "B2",
            &format!("hand-off p99, notifications {tag}"),
            pct(&latencies, 99.0),
            "ms",
            &target("<= 2"),
        );
        b.report(
            "B2",
            &format!("hand-off max, notifications {tag}"),
            pct(&latencies, 100.0),
            "ms",
            "",
        );
        if mode.is_empty() {
            all.insert(notifications, latencies);
        }
        a.close().await;
        bb.close().await;
    }
    Ok(all)
}

pub(crate) fn plot(
    latencies: &HashMap<bool, Vec<f64>>,
    path: &std::path::Path,
) -> Result<(), BoxError> {
    use plotters::prelude::*;
    let font = std::fs::read("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
        .map_err(|e| format!("the plot needs DejaVuSans (Debian's fonts-dejavu-core): {e}"))?;
    let font: &'static [u8] = Box::leak(font.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font).map_err(|_| "font")?;
    std::fs::create_dir_all(path.parent().unwrap())?;
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = latencies.values().flatten().copied().fold(0.1, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption("B2 hand-off latency (CDF, log scale)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((0.05f64..max).log_scale(), 0f64..100f64)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms)")
        .y_desc("% of hand-offs")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (on, color) in [(true, &BLUE), (false, &RED)] {
        let Some(v) = latencies.get(&on) else {
            continue;
        };
        let n = v.len() as f64;
        let points: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(i, x)| (x.max(0.05), (i + 1) as f64 * 100.0 / n))
            .collect();
        let label = if on {
            "notifications on (sharded pub/sub)"
        } else {
            "notifications off (retry every 50 ms)"
        };
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}
