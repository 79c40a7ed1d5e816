// The gradguard VS Code extension: a thin client that starts the gradguard language server and adds commands,
// a status bar item and settings handling.  The server is started through client/launcher/launch.py, outside the
// workspace and with the interpreter's isolation flags, so that no file in the workspace can shadow a module.
// Everything that can be decided without VS Code lives in settings.ts, interpreter.ts and environment.ts
// (unit-tested).

import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";

import { Env, Probe, bundledLibsPath, launcherPath, libsArgs, probeGradguard, processEnv, runProcess } from "./environment";
import { Interpreter, resolveInterpreter, serverCommand } from "./interpreter";
import { onDidChangeInterpreter, selectedInterpreter } from "./pythonExtension";
import { Getter, Settings, changeAction, readSettings, shouldNotify, toServerSettings } from "./settings";

const RESTRICTED = new Set(["interpreter", "importStrategy", "args"]);

type Status = "starting" | "ready" | "error" | "disabled" | "stopped";

class GradguardExtension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private settings: Settings;
  private interpreter: Interpreter | undefined;
  private found: { python: string; probe: Probe; libs?: string } | undefined;
  private serverLine = "";
  private queue: Promise<unknown> = Promise.resolve();
  private readonly output: vscode.LogOutputChannel;
  private readonly status: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("gradguard", { log: true });
    this.status = vscode.window.createStatusBarItem("gradguard.status", vscode.StatusBarAlignment.Right, 100);
    this.status.name = "gradguard";
    this.status.command = "gradguard.showLogs";
    this.settings = this.readSettings().settings;
    this.disposables.push(this.output, this.status);
  }

  private log(message: string): void {
    this.output.info(`[client] ${message}`);
  }

  private readSettings(scope?: vscode.Uri): { settings: Settings; problems: string[] } {
    const cfg = vscode.workspace.getConfiguration("gradguard", scope);
    const get: Getter = (key) => {
      // In an untrusted workspace the workspace's values of these settings must not choose what runs.
      if (!vscode.workspace.isTrusted && RESTRICTED.has(key)) {
        const i = cfg.inspect(key);
        return i?.globalValue ?? i?.defaultValue;
      }
      return cfg.get(key);
    };
    return readSettings(get);
  }

  private setStatus(status: Status, detail = ""): void {
    const icons: Record<Status, string> = {
      starting: "$(loading~spin)",
      ready: "$(check)",
      error: "$(error)",
      disabled: "$(circle-slash)",
      stopped: "$(debug-stop)",
    };
    this.status.text = `${icons[status]} gradguard`;
    const where = this.interpreter ? `\n${this.interpreter.path} (from ${this.interpreter.source})` : "";
    this.status.tooltip = `gradguard: ${status}${detail ? `: ${detail}` : ""}${where}\nClick to show the output.`;
    this.status.accessibilityInformation = { label: `gradguard ${status}`, role: "button" };
    this.status.backgroundColor = status === "error" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    this.status.show();
  }

  private notify(level: "error" | "warning" | "info", message: string, ...buttons: string[]): Thenable<string | undefined> {
    this.log(`${level}: ${message}`);
    if (!shouldNotify(this.settings.showNotifications, level)) {
      return Promise.resolve(undefined);
    }
    const show = level === "error" ? vscode.window.showErrorMessage : level === "warning" ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    return show(`gradguard: ${message}`, ...buttons);
  }

  /** Serialises start/stop/restart so that rapid setting changes never race. */
  private enqueue<T>(job: () => Promise<T>): Promise<T> {
    const next = this.queue.then(job, job);
    this.queue = next.catch(() => undefined);
    return next;
  }

  activate(): void {
    const c = this.context;
    this.disposables.push(
      vscode.commands.registerCommand("gradguard.restart", () => this.enqueue(() => this.restartNow())),
      vscode.commands.registerCommand("gradguard.showOutput", () => this.output.show(true)),
      vscode.commands.registerCommand("gradguard.showLogs", () => this.output.show(true)),
      vscode.commands.registerCommand("gradguard.showDebugInfo", () => this.showDebugInfo()),
      vscode.commands.registerCommand("gradguard.executeFixAll", (uri?: vscode.Uri) => this.fixAll(uri)),
      vscode.commands.registerCommand("gradguard.executeRunFile", (uri?: vscode.Uri) => this.runFile(uri)),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("gradguard")) {
          void this.enqueue(() => this.onSettingsChanged());
        }
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => void this.enqueue(() => this.restartNow())),
    );
    void onDidChangeInterpreter(() => {
      if (!this.settings.interpreter) {
        this.log("The Python extension selected another interpreter: restarting.");
        void this.enqueue(() => this.restartNow());
      }
    }).then((d) => d && this.disposables.push(d));
    c.subscriptions.push(this);
    void this.enqueue(() => this.startNow());
  }

  private async onSettingsChanged(): Promise<void> {
    const { settings, problems } = this.readSettings();
    problems.forEach((p) => this.log(p));
    const action = changeAction(this.settings, settings);
    this.settings = settings;
    this.log(`Settings changed: ${action}.`);
    switch (action) {
      case "start":
      case "restart":
        await this.restartNow();
        break;
      case "stop":
        await this.stopNow();
        this.setStatus("disabled", "gradguard.enable is false");
        break;
      case "notify":
        if (this.client?.state === State.Running) {
          await this.client.sendNotification(DidChangeConfigurationNotification.type, {
            settings: { gradguard: toServerSettings(settings, vscode.workspace.isTrusted) },
          });
        } else if (!this.client) {
          await this.startNow();
        }
        break;
      case "none":
        break;
    }
  }

  private async restartNow(): Promise<void> {
    await this.stopNow();
    await this.startNow();
  }

  private async stopNow(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(5000);
      } catch (e) {
        this.log(`Stopping the server: ${String(e)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    this.setStatus("stopped");
  }

  private workspaceFolder(): string | undefined {
    return vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === "file")?.uri.fsPath;
  }

  private workspaceFolders(): string[] {
    return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath);
  }

  /** client/launcher/launch.py inside the installed extension. */
  private get launcher(): string {
    return launcherPath(this.context.extensionUri.fsPath);
  }

  /** The environment of every process the extension starts (no workspace PYTHONPATH entries when untrusted). */
  private processEnv(): Env {
    return processEnv(process.env, vscode.workspace.isTrusted, this.workspaceFolders(), process.platform);
  }

  private async chooseInterpreter(): Promise<Interpreter | undefined> {
    const folder = this.workspaceFolder();
    const { interpreter, problems } = resolveInterpreter({
      setting: this.settings.interpreter,
      pythonExtension: this.settings.interpreter ? undefined : await selectedInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri),
      workspaceFolder: folder,
      trusted: vscode.workspace.isTrusted,
      workspaceFolders: this.workspaceFolders(),
      env: process.env,
      home: os.homedir(),
      platform: process.platform,
      isExecutable: (p) => {
        try {
          fs.accessSync(p, fs.constants.X_OK);
          return fs.statSync(p).isFile();
        } catch {
          return false;
        }
      },
    });
    for (const p of problems) {
      if (p.startsWith("gradguard.interpreter")) {
        void this.notify("warning", p);
      } else {
        this.log(p);
      }
    }
    return interpreter;
  }

  /** The bundled server (bundled/libs) inside the installed extension, when this build has one. */
  private get bundledLibs(): string | undefined {
    const libs = bundledLibsPath(this.context.extensionUri.fsPath);
    return fs.existsSync(path.join(libs, "gradguard", "__init__.py")) ? libs : undefined;
  }

  /**
   * Which gradguard the interpreter runs (importStrategy: the bundled server, or the environment's with the bundled
   * one as fallback) and the probe; undefined (after telling the user) when it cannot run one.
   */
  private async pythonWithGradguard(base: Interpreter): Promise<{ python: string; probe: Probe; libs?: string } | undefined> {
    const libs = this.bundledLibs;
    const strategy = this.settings.importStrategy;
    if (!libs) {
      this.log("This build of the extension has no bundled server (bundled/libs): using the interpreter's gradguard.");
    }
    const probe = await probeGradguard(base.path, this.launcher, this.workspaceFolders(), runProcess, this.processEnv(), libsArgs(strategy, libs));
    if (probe.installed) {
      const from = probe.source === "bundled" ? "bundled with the extension" : `installed in the environment (${probe.location ?? "?"})`;
      this.log(`gradguard ${probe.version} ${from}, run by ${base.path} (Python ${probe.python ?? "?"}).`);
      return { python: base.path, probe, libs: probe.source === "bundled" ? libs : undefined };
    }
    if (probe.tooOld) {
      this.setStatus("error", `Python ${probe.python ?? "?"} is too old`);
      void this.notify("error", `${base.path} is Python ${probe.python ?? "?"}: the gradguard server needs Python 3.10 or later. Set gradguard.interpreter or select another interpreter.`, "Open Settings").then((c) => {
        if (c) {
          void vscode.commands.executeCommand("workbench.action.openSettings", "gradguard.interpreter");
        }
      });
      return undefined;
    }
    this.setStatus("error", `gradguard is not available in ${base.path}`);
    const why = libs ? probe.detail : `${probe.detail}; this build of the extension has no bundled server (build the VSIX with 'make vsix')`;
    void this.notify("error", `gradguard is not installed in ${base.path} (${why}).`, "Show Logs").then((c) => c && this.output.show(true));
    return undefined;
  }

  private async startNow(): Promise<void> {
    const { settings, problems } = this.readSettings();
    this.settings = settings;
    problems.forEach((p) => void this.notify("warning", p));
    if (!settings.enable) {
      this.setStatus("disabled", "gradguard.enable is false");
      return;
    }
    this.setStatus("starting");
    this.interpreter = await this.chooseInterpreter();
    if (!this.interpreter) {
      this.setStatus("error", "no Python interpreter");
      void this.notify("error", "No Python interpreter found. Set gradguard.interpreter or select one in the Python extension.", "Open Settings").then((c) => {
        if (c) {
          void vscode.commands.executeCommand("workbench.action.openSettings", "gradguard.interpreter");
        }
      });
      return;
    }
    this.log(`Interpreter: ${this.interpreter.path} (from ${this.interpreter.source}); import strategy ${settings.importStrategy}.`);
    let found: { python: string; probe: Probe; libs?: string } | undefined;
    try {
      found = await this.pythonWithGradguard(this.interpreter);
    } catch (e) {
      this.setStatus("error", String(e));
      void this.notify("error", `Could not set up gradguard: ${e instanceof Error ? e.message : String(e)}`, "Show Output").then((c) => c && this.output.show(true));
      return;
    }
    if (!found) {
      return;
    }
    // Never in the workspace: see client/launcher/launch.py.
    const { command, args, cwd } = serverCommand(found.python, this.launcher, found.probe.flags, settings.args, this.workspaceFolders(), found.libs);
    this.found = found;
    const serverOptions: ServerOptions = {
      command,
      args,
      transport: TransportKind.stdio,
      options: { cwd, env: this.processEnv() },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        { notebook: "*", language: "python" },
      ],
      // workspaceTrusted: the server refuses gradguard.runFile in an untrusted workspace too.  Granting trust
      // restarts the server (onDidGrantWorkspaceTrust), which then starts trusted.
      initializationOptions: toServerSettings(settings, vscode.workspace.isTrusted),
      outputChannel: this.output,
      traceOutputChannel: this.output,
      revealOutputChannelOn: 4 /* RevealOutputChannelOn.Never */,
      middleware: {
        workspace: {
          // The server asks for section "gradguard": answer in its own shape (docs/lsp.md), not VS Code's.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) {
              return result;
            }
            return params.items.map((item, i) =>
              item.section === "gradguard"
                ? toServerSettings(this.readSettings(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined).settings, vscode.workspace.isTrusted)
                : result[i],
            );
          },
        },
      },
    };
    this.serverLine = `${command} ${args.join(" ")} (in ${cwd})`;
    this.log(`Starting: ${command} ${args.join(" ")} (in ${cwd}; workspace trusted: ${vscode.workspace.isTrusted})`);
    const client = new LanguageClient("gradguard", "gradguard", serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) {
        return;
      }
      if (e.newState === State.Running) {
        this.setStatus("ready");
      } else if (e.newState === State.Starting) {
        this.setStatus("starting");
      } else if (e.newState === State.Stopped) {
        this.setStatus("error", "the server stopped");
      }
    });
    try {
      await client.start();
      this.setStatus("ready");
      this.log("Server ready.");
    } catch (e) {
      this.setStatus("error", String(e));
      void this.notify("error", `The server failed to start: ${e instanceof Error ? e.message : String(e)}`, "Show Output").then((c) => c && this.output.show(true));
    }
  }

  private targetDocument(uri?: vscode.Uri): vscode.TextDocument | undefined {
    if (uri instanceof vscode.Uri) {
      return vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    }
    return vscode.window.activeTextEditor?.document;
  }

  private runningClient(): LanguageClient | undefined {
    if (this.client?.state === State.Running) {
      return this.client;
    }
    void this.notify("error", "The server is not running; see the output.", "Show Output").then((c) => c && this.output.show(true));
    return undefined;
  }

  private async fixAll(uri?: vscode.Uri): Promise<void> {
    const doc = this.targetDocument(uri);
    const client = this.runningClient();
    if (!doc || doc.languageId !== "python" || !client) {
      return;
    }
    const result = (await client.sendRequest(ExecuteCommandRequest.type, {
      command: "gradguard.fixAll",
      arguments: [doc.uri.toString()],
    })) as { applied?: number } | null;
    const n = result?.applied ?? 0;
    const skipped = (result as { skipped?: string } | null)?.skipped;
    vscode.window.setStatusBarMessage(`gradguard: applied ${n} fix${n === 1 ? "" : "es"}${skipped ? `; ${skipped}` : ""}`, 8000);
    this.log(`Fix All on ${doc.uri.fsPath}: ${n} applied${skipped ? `; ${skipped}` : ""}.`);
  }

  private async runFile(uri?: vscode.Uri): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showWarningMessage("gradguard: Run File runs your code; it is disabled in untrusted workspaces.");
      return;
    }
    const doc = uri instanceof vscode.Uri ? await vscode.workspace.openTextDocument(uri) : vscode.window.activeTextEditor?.document;
    if (!doc || doc.languageId !== "python") {
      void vscode.window.showWarningMessage("gradguard: open a Python file to run it.");
      return;
    }
    if (doc.isUntitled) {
      void vscode.window.showWarningMessage("gradguard: save the file first; Run File runs the saved file.");
      return;
    }
    if (doc.isDirty && !(await doc.save())) {
      return;
    }
    const client = this.runningClient();
    if (!client) {
      return;
    }
    const name = path.basename(doc.uri.fsPath);
    this.log(`Run File: ${doc.uri.fsPath} with ${this.found?.python ?? "?"}`);
    type RunResult = { ok?: boolean; status?: string; diagnostics?: number; returncode?: number; error?: { type?: string; message?: string } | null; report?: string };
    let result: RunResult | null = null;
    let cancelled = false;
    try {
      // A notification with Cancel while it runs.  Cancel stops the script with gradguard.cancelRun (pygls answers
      // $/cancelRequest for a command but does not stop the command itself).  The server reports no progress of its
      // own for this request ("progress": false).
      result = (await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `gradguard: running ${name}`, cancellable: true },
        async (progress, token) => {
          token.onCancellationRequested(() => {
            cancelled = true;
            this.log(`Run File: ${name} cancelled.`);
            void client.sendRequest(ExecuteCommandRequest.type, { command: "gradguard.cancelRun", arguments: [doc.uri.toString()] }).catch(() => undefined);
          });
          progress.report({ message: "under the runtime doctor (its output goes to the gradguard log)" });
          return client.sendRequest(ExecuteCommandRequest.type, { command: "gradguard.runFile", arguments: [{ uri: doc.uri.toString(), progress: false }] }, token);
        },
      )) as RunResult | null;
    } catch (e) {
      if (cancelled) {
        vscode.window.setStatusBarMessage(`gradguard: ${name} was stopped.`, 5000);
        return;
      }
      void this.notify("error", `Run File failed: ${e instanceof Error ? e.message : String(e)}`, "Show Logs").then((c) => c && this.output.show(true));
      return;
    }
    // The report (saving and modifying lines, as path:line:col links) is already in this Output channel: the server
    // logs it (window/logMessage), for every editor.
    const n = result?.diagnostics ?? 0;
    if (result?.ok) {
      const summary = `${name} ran without in-place errors.`;
      vscode.window.setStatusBarMessage(`gradguard: ${summary}`, 10000);
      void this.notify("info", summary);
      return;
    }
    const summary =
      result?.error?.type === "TorchNotInstalled"
        ? `${result.error.message ?? "torch is not installed"} (gradguard.interpreter chooses it).`
        : n > 0
          ? `${name} failed with an in-place error: ${n} culprit line${n === 1 ? "" : "s"} marked in the editor.`
          : `${name} failed${result?.error?.type ? ` (${result.error.type})` : ""}, not with an in-place error: see the report.`;
    vscode.window.setStatusBarMessage(`gradguard: ${summary}`, 10000);
    // A failed run is the answer to a command the user gave: always say so, with the way to the report.
    this.log(`error: ${summary}`);
    const choice = await vscode.window.showErrorMessage(`gradguard: ${summary}`, "Show Report");
    if (choice === "Show Report") {
      this.output.show(true);
    }
  }

  /** "gradguard: Show Debug Info": what runs, where from, with which settings (and the server's own view). */
  private async showDebugInfo(): Promise<void> {
    const ext = this.context.extension.packageJSON as { version?: string };
    const lines = [
      "gradguard debug information",
      `  extension:        ${ext.version ?? "?"} (${this.context.extensionUri.fsPath})`,
      `  VS Code:          ${vscode.version} (${vscode.env.appName}; ${process.platform} ${process.arch})`,
      `  interpreter:      ${this.interpreter?.path ?? "none"} (from ${this.interpreter?.source ?? "-"}; Python ${this.found?.probe.python ?? "?"})`,
      `  import strategy:  ${this.settings.importStrategy}; gradguard ${this.found?.probe.version ?? "?"} ${this.found?.probe.source === "bundled" ? "bundled with the extension" : "from the environment"} (${this.found?.probe.location ?? "?"})`,
      `  server command:   ${this.serverLine || "not started"}`,
      `  server state:     ${this.client ? State[this.client.state] : "not running"}`,
      `  workspace:        ${this.workspaceFolders().join(", ") || "none"} (trusted: ${vscode.workspace.isTrusted})`,
      `  settings:         ${JSON.stringify(toServerSettings(this.settings, vscode.workspace.isTrusted))}`,
    ];
    if (this.client?.state === State.Running) {
      try {
        const info = await this.client.sendRequest(ExecuteCommandRequest.type, { command: "gradguard.debugInfo", arguments: [] });
        lines.push(`  server:           ${JSON.stringify(info)}`);
      } catch (e) {
        lines.push(`  server:           ${String(e)}`);
      }
    }
    this.output.info(lines.join("\n"));
    this.output.show(true);
  }

  async deactivate(): Promise<void> {
    await this.stopNow();
  }

  dispose(): void {
    void this.stopNow();
    this.disposables.forEach((d) => d.dispose());
  }
}

let instance: GradguardExtension | undefined;

export function activate(context: vscode.ExtensionContext): void {
  instance = new GradguardExtension(context);
  instance.activate();
}

export async function deactivate(): Promise<void> {
  await instance?.deactivate();
  instance = undefined;
}
