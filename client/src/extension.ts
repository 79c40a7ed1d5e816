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

import { Env, Probe, ensureBundled, installSpec, launcherPath, pipInstallArgs, probeGradguard, processEnv, runProcess, safeCwd } from "./environment";
import { Interpreter, resolveInterpreter, serverCommand } from "./interpreter";
import { onDidChangeInterpreter, selectedInterpreter } from "./pythonExtension";
import { Getter, Settings, changeAction, readSettings, shouldNotify, toServerSettings } from "./settings";

const RESTRICTED = new Set(["interpreter", "importStrategy", "args"]);

type Status = "starting" | "ready" | "error" | "disabled" | "stopped";

class GradguardExtension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private settings: Settings;
  private interpreter: Interpreter | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly output: vscode.LogOutputChannel;
  private readonly status: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("gradguard", { log: true });
    this.status = vscode.window.createStatusBarItem("gradguard.status", vscode.StatusBarAlignment.Right, 100);
    this.status.name = "gradguard";
    this.status.command = "gradguard.showOutput";
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

  /** The python that has gradguard (and its probe), per importStrategy; undefined when the user has to act first. */
  private async pythonWithGradguard(base: Interpreter): Promise<{ python: string; probe: Probe } | undefined> {
    if (this.settings.importStrategy === "useBundled") {
      const storage = this.context.globalStorageUri.fsPath;
      const version = String(this.context.extension.packageJSON.version ?? "0.0.0");
      return vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "gradguard", cancellable: false },
        (progress) =>
          ensureBundled({
            basePython: base.path,
            launcher: this.launcher,
            exclude: this.workspaceFolders(),
            storageDir: storage,
            extensionVersion: version,
            platform: process.platform,
            env: this.processEnv(),
            exists: (p) => fs.existsSync(p),
            report: (message) => {
              this.log(message);
              progress.report({ message });
            },
          }),
      );
    }
    const probe = await probeGradguard(base.path, this.launcher, this.workspaceFolders(), runProcess, this.processEnv());
    if (probe.installed) {
      this.log(`gradguard ${probe.version} found in ${base.path} (Python ${probe.python ?? "?"}).`);
      return { python: base.path, probe };
    }
    this.setStatus("error", `gradguard is not installed in ${base.path}`);
    const install = "Install gradguard";
    const bundled = "Use a private environment";
    void this.notify("error", `gradguard is not installed in ${base.path} (${probe.detail}).`, install, bundled, "Show Output").then(async (choice) => {
      if (choice === install) {
        await this.installInto(base.path);
      } else if (choice === bundled) {
        await vscode.workspace.getConfiguration("gradguard").update("importStrategy", "useBundled", vscode.ConfigurationTarget.Global);
      } else if (choice === "Show Output") {
        this.output.show(true);
      }
    });
    return undefined;
  }

  private async installInto(python: string): Promise<void> {
    const spec = installSpec(process.env, undefined);
    this.output.show(true);
    this.log(`Running ${python} ${pipInstallArgs(spec).join(" ")}`);
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `gradguard: installing ${spec} into ${python}` },
      // Not isolated (-I): `pip install` may need the user site-packages.  Run outside the workspace all the same.
      () => runProcess(python, pipInstallArgs(spec), { cwd: safeCwd(this.launcher), env: this.processEnv() }),
    );
    this.output.info(result.stdout + result.stderr);
    if (result.code !== 0) {
      void this.notify("error", `pip install ${spec} failed; see the output.`);
      return;
    }
    await this.enqueue(() => this.restartNow());
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
    let found: { python: string; probe: Probe } | undefined;
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
    const { command, args, cwd } = serverCommand(found.python, this.launcher, found.probe.flags, settings.args, this.workspaceFolders());
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
    vscode.window.setStatusBarMessage(`gradguard: applied ${n} fix${n === 1 ? "" : "es"}`, 5000);
    this.log(`Fix All on ${doc.uri.fsPath}: ${n} applied.`);
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
    this.output.show(true);
    this.log(`Run File: ${doc.uri.fsPath}`);
    try {
      const result = (await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: `gradguard: running ${name}` },
        () => client.sendRequest(ExecuteCommandRequest.type, { command: "gradguard.runFile", arguments: [doc.uri.toString()] }),
      )) as { ok?: boolean; diagnostics?: number; returncode?: number } | null;
      const n = result?.diagnostics ?? 0;
      const summary = result?.ok
        ? `${name} ran without in-place errors.`
        : n > 0
          ? `${name} failed: ${n} in-place culprit${n === 1 ? "" : "s"} marked in the editor (source gradguard-run).`
          : `${name} failed (exit code ${result?.returncode ?? "?"}); see the output.`;
      vscode.window.setStatusBarMessage(`gradguard: ${summary}`, 10000);
      void this.notify(result?.ok ? "info" : "warning", summary);
    } catch (e) {
      void this.notify("error", `Run File failed: ${e instanceof Error ? e.message : String(e)}`);
    }
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
