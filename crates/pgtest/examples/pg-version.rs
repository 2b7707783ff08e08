//! Prints the exact version of the PostgreSQL the harness would start (honours PGCOMPRESS_PG_MAJOR),
//! for the compatibility matrix's table; an error is one line on stderr and exit status 1.

fn main() {
    let install = match pgtest::PgInstall::find() {
        Ok(install) => install,
        Err(e) => {
            eprintln!("pg-version: {e}");
            std::process::exit(1);
        }
    };
    let out = match std::process::Command::new(install.bin("postgres"))
        .arg("--version")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("pg-version: {}: {e}", install.bin("postgres").display());
            std::process::exit(1);
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // "postgres (PostgreSQL) 17.10" -> "17.10"
    let version = text
        .split(')')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or("?");
    println!("{version}");
}
