//! Prints the exact version of the PostgreSQL the harness would start (honours PGCOMPRESS_PG_MAJOR),
//! for the compatibility matrix's table.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let install = pgtest::PgInstall::find()?;
    let out = std::process::Command::new(install.bin("postgres"))
        .arg("--version")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "postgres (PostgreSQL) 17.10" -> "17.10"
    let version = text
        .split(')')
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .next()
        .unwrap_or("?");
    println!("{version}");
    Ok(())
}
