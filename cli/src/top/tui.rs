//! The full-screen view of `top` (ratatui on crossterm): a table refreshed every
//! `--every`, keys read between refreshes, the terminal given back as it was on every
//! way out (a key, a signal, an error, a panic).

use std::io::Stdout;
use std::time::Duration;

use cluster_rwlock::LockClient;
use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use futures_util::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row as TableRow, Table, TableState};
use ratatui::{Frame, Terminal};

use super::sample::{Sample, Sampler};
use super::view::{self, Sort};
use crate::code;
use crate::shown::escaped;

/// What the keys are doing.
enum Input {
    /// Keys move, sort, and so on.
    Normal,
    /// Typing a filter after `/`.
    Filter(String),
    /// `b` asked to break this lock: `y` does it.
    Confirm(String),
}

struct App {
    sample: Sample,
    sort: Sort,
    filter: String,
    input: Input,
    table: TableState,
    /// The last thing said (a break done, an error), shown above the footer.
    said: String,
}

/// Gives the terminal back: on drop, whatever the way out.
struct Screen(Terminal<CrosstermBackend<Stdout>>);

impl Screen {
    fn open() -> std::io::Result<Screen> {
        enable_raw_mode()?;
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen) {
            let _ = disable_raw_mode();
            return Err(e);
        }
        // a panic prints its message on the screen the user sees again
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        Ok(Screen(Terminal::new(CrosstermBackend::new(out))?))
    }
}

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen);
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
        let _ = self.0.show_cursor();
    }
}

fn draw(f: &mut Frame<'_>, app: &mut App) {
    let warnings = view::warnings(&app.sample);
    let [top, body, said, warned, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(u16::try_from(warnings.len()).unwrap_or(u16::MAX)),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let title = format!(
        "cluster-rwlock top  sort: {} (s)  filter: {} (/)  b: break  q: quit",
        app.sort.label(),
        if app.filter.is_empty() {
            "-".to_string()
        } else {
            escaped(&app.filter).into_owned()
        }
    );
    f.render_widget(
        Paragraph::new(title).style(Style::default().add_modifier(Modifier::REVERSED)),
        top,
    );
    let now = app.sample.at.unwrap_or_else(std::time::SystemTime::now);
    let rows = view::arrange(&app.sample, app.sort, &app.filter);
    let shown = rows.len();
    let lines: Vec<TableRow<'_>> = rows
        .iter()
        .map(|r| {
            let row = TableRow::new(view::cells(r, now));
            if view::overdue(r) {
                row.style(Style::default().add_modifier(Modifier::BOLD))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Min(16),
        Constraint::Length(8),
        Constraint::Min(14),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Length(14),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(15),
    ];
    let table = Table::new(lines, widths)
        .header(TableRow::new(view::HEADER).style(Style::default().add_modifier(Modifier::BOLD)))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    if shown == 0 {
        app.table.select(None);
    } else if app.table.selected().is_none_or(|i| i >= shown) {
        app.table.select(Some(0));
    }
    f.render_stateful_widget(table, body, &mut app.table);
    let line = match &app.input {
        Input::Normal => app.said.clone(),
        Input::Filter(typed) => format!("filter: {}_", escaped(typed)),
        Input::Confirm(name) => format!(
            "break {}? every hold goes and the fence is raised (y/n)",
            escaped(name)
        ),
    };
    f.render_widget(Paragraph::new(Line::from(line)), said);
    let warned_lines: Vec<Line<'_>> = warnings.into_iter().map(Line::from).collect();
    f.render_widget(
        Paragraph::new(warned_lines).style(Style::default().add_modifier(Modifier::BOLD)),
        warned,
    );
    f.render_widget(Paragraph::new(view::footer(&app.sample, shown)), foot);
}

/// The name of the selected lock, if any.
fn selected(app: &App) -> Option<String> {
    let rows = view::arrange(&app.sample, app.sort, &app.filter);
    app.table
        .selected()
        .and_then(|i| rows.get(i))
        .map(|r| r.name().to_string())
}

/// What a key does; `false` to quit.
async fn key(client: &LockClient, app: &mut App, k: KeyEvent) -> bool {
    if k.kind != KeyEventKind::Press {
        return true;
    }
    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl_c {
        return false;
    }
    match std::mem::replace(&mut app.input, Input::Normal) {
        Input::Filter(mut typed) => match k.code {
            KeyCode::Enter => app.filter = typed,
            KeyCode::Esc => {}
            KeyCode::Backspace => {
                typed.pop();
                app.input = Input::Filter(typed);
            }
            KeyCode::Char(c) => {
                typed.push(c);
                app.input = Input::Filter(typed);
            }
            _ => app.input = Input::Filter(typed),
        },
        Input::Confirm(name) => {
            if k.code == KeyCode::Char('y') {
                app.said = match client.force_release(&name, None).await {
                    Ok(r) => format!(
                        "broke {}: {} hold(s) removed, fence {}",
                        escaped(&name),
                        r.holds_removed,
                        r.fence.map_or("-".into(), |f| f.to_string())
                    ),
                    Err(e) => format!(
                        "cannot break {}: {}",
                        escaped(&name),
                        escaped(&e.to_string())
                    ),
                };
            } else {
                app.said = "nothing broken".into();
            }
        }
        Input::Normal => match k.code {
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('s') => app.sort = app.sort.next(),
            KeyCode::Char('/') => app.input = Input::Filter(app.filter.clone()),
            KeyCode::Char('b') => {
                if let Some(name) = selected(app) {
                    app.input = Input::Confirm(name);
                }
            }
            KeyCode::Down | KeyCode::Char('j') => app.table.select_next(),
            KeyCode::Up | KeyCode::Char('k') => app.table.select_previous(),
            _ => {}
        },
    }
    true
}

/// The full-screen view, until `q`, Ctrl-C or a signal.
pub async fn run(
    client: &LockClient,
    mut sampler: Sampler,
    keep: impl Fn(&mut Sample),
    every: Duration,
) -> i32 {
    let (mut interrupt, mut terminate) = match crate::signals::stop_signals() {
        Ok(listeners) => listeners,
        Err(code) => return code,
    };
    let mut screen = match Screen::open() {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "cluster-rwlock: top needs a terminal ({e}); --once or --json print without one"
            );
            return code::USAGE;
        }
    };
    let mut app = App {
        sample: Sample::default(),
        sort: Sort::Waiters,
        filter: String::new(),
        input: Input::Normal,
        table: TableState::default(),
        said: String::new(),
    };
    let mut events = EventStream::new();
    let mut next = tokio::time::Instant::now();
    loop {
        if tokio::time::Instant::now() >= next {
            match sampler.sample(client).await {
                Ok(mut s) => {
                    keep(&mut s);
                    app.sample = s;
                }
                Err(e) => app.said = format!("refresh failed: {}", escaped(&e.to_string())),
            }
            next = tokio::time::Instant::now() + every;
        }
        if screen.0.draw(|f| draw(f, &mut app)).is_err() {
            return code::UNAVAILABLE;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = interrupt.recv() => return 0,
            _ = terminate.recv() => return 0,
            e = events.next() => match e {
                Some(Ok(Event::Key(k))) => {
                    if !key(client, &mut app, k).await {
                        return 0;
                    }
                }
                Some(Ok(_)) => {}
                // the terminal went away
                Some(Err(_)) | None => return 0,
            },
        }
    }
}
