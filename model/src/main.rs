mod lua;
mod redis;
fn main() {}
