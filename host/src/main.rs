use clap::Parser;
use faultline::auth::{Role, mint_key};
use faultline::config::{Cli, Command, HostConfig, KeysCommand, ServeArgs};
use faultline::store::{AuditRow, Store};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command.unwrap_or_else(|| Command::Serve(ServeArgs::default())) {
        Command::Serve(args) => {
            faultline::telemetry::init_logs(args.log_json);
            faultline::serve(&HostConfig::new(cli.data_dir, &args)?).await
        }
        Command::Keys { command: KeysCommand::Create { name, role } } => {
            let role = Role::parse(&role).ok_or_else(|| anyhow::anyhow!("role must be collector, viewer, engineer or admin"))?;
            std::fs::create_dir_all(&cli.data_dir)?;
            let store = Store::open_sqlite(&cli.data_dir.join("faultline.db")).await?;
            let key = mint_key(&store, &name, role, Some("cli")).await?;
            let detail = serde_json::json!({ "id": key.row.id, "role": role.as_str() }).to_string();
            store.record_audit(&AuditRow::by_host("cli", "api_key.create", &name, "succeeded", Some(detail))).await?;
            println!("{}", key.secret);
            Ok(())
        }
        Command::ConsoleWatchdog { id: _, port, after_seconds, token_file, commands } => {
            let after = std::time::Duration::from_secs(after_seconds);
            faultline::capabilities::adb::watchdog::run_console_watchdog(port, token_file, after, commands).await
        }
    }
}
