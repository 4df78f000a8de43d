// Type declarations of the forewarn JavaScript SDK (forewarn.js), for editor completion and
// `// @ts-check` in plain JavaScript plugins. The shapes are those the component gets from
// the forewarn:plugin@0.3.0 WIT (componentize-js): record fields in camelCase, enums as their
// kebab-case names, u64 as BigInt, `option<T>` as `T | undefined`.

/** Which maintenance IMDS announced ('unknown': a type newer than this forewarn). */
export type EventType =
  | 'freeze'
  | 'reboot'
  | 'redeploy'
  | 'preempt'
  | 'terminate'
  | 'shutdown'
  | 'unknown';

/** Where the event stands at IMDS. */
export type EventStatus = 'scheduled' | 'started';

/** Who started it ('operating-system': forewarn's own Shutdown event). */
export type EventSource = 'platform' | 'user' | 'operating-system' | 'unknown';

/** Why the plugin is called. */
export type Phase = 'prepare' | 'started' | 'ended-after-start' | 'ended-without-start';

/** A Scheduled Event, as IMDS listed it. */
export interface ScheduledEvent {
  id: string;
  eventType: EventType;
  /** The type as IMDS spelled it ("Reboot"). */
  eventTypeRaw: string;
  resourceType: string;
  /** The VMs it names. */
  resources: string[];
  status: EventStatus;
  /** NotBefore, in milliseconds since the Unix epoch on the VM's clock (corrected for IMDS's). */
  notBeforeUnixMs: bigint | undefined;
  description: string;
  source: EventSource;
  /** DurationInSeconds (-1 or undefined: unknown). */
  durationSeconds: bigint | undefined;
}

/** The VM's priority and eviction policy, from the compute metadata. */
export interface VmInfo {
  priority: 'regular' | 'spot' | 'low' | 'unknown';
  evictionPolicy: 'deallocate' | 'delete' | 'unknown' | undefined;
}

/** What a call knows besides the event. */
export interface Context {
  vmName: string;
  /** Whether the event names this VM (or names none). */
  affectsThisVm: boolean;
  /** When this call's budget ends, in milliseconds since the Unix epoch. */
  deadlineUnixMs: bigint;
  /** Which call of this plugin for this event and phase, from 1. */
  attempt: number;
  /** Milliseconds from the call's start to NotBefore; undefined once the event started. */
  untilNotBeforeMs: bigint | undefined;
  vm: VmInfo;
}

/** What `onStart` is told when the daemon (re)loads the plugin. */
export interface StartContext {
  vmName: string;
  vm: VmInfo;
  /** Whether this is the plugin's first start on this VM (no state yet). */
  firstRun: boolean;
  deadlineUnixMs: bigint;
}

/** The plugin's answer to a call. */
export type Decision =
  | { tag: 'approve' }
  | { tag: 'defer'; val: { reason: string; retryAfterMs: number } };

/** Deferral retry when the plugin does not say, in milliseconds. */
export const DEFAULT_RETRY_AFTER_MS: number;

/** Ready: the maintenance may start as far as this plugin cares. */
export function approve(): Decision;
/** Not yet: ask again after `retryAfterMs` milliseconds. */
export function defer(reason: unknown, retryAfterMs?: number): Decision;
/** Whether the event stops or removes the VM (everything but a Freeze). */
export function takesVmDown(event: ScheduledEvent): boolean;
/** Whether Azure may evict this VM: a Spot or low-priority VM. */
export function isEvictable(vm: VmInfo): boolean;
/** Whether an eviction deletes the VM and its disks. */
export function evictionDeletesDisks(vm: VmInfo): boolean;
/** Milliseconds to NotBefore (a Number; 0 once passed), undefined when there is none. */
export function untilNotBeforeMs(ctx: Context): number | undefined;

/** A host call did not do what was asked. */
export class HostError extends Error {
  constructor(call: string, kind: HostErrorKind, detail?: string);
  /** The host call: 'http-send', 'state-set', … */
  call: string;
  kind: HostErrorKind;
  detail: string;
}
/** Why a host call failed ('not-granted': the manifest lacks the line the message names). */
export type HostErrorKind = 'not-granted' | 'invalid' | 'failed' | 'timed-out';

/** Lines in the daemon's log under this plugin's name. */
export const log: {
  trace(message: unknown): void;
  debug(message: unknown): void;
  info(message: unknown): void;
  warn(message: unknown): void;
  error(message: unknown): void;
};

/** A value from the manifest's [config] table, or `fallback`. */
export function config(key: string): string | undefined;
export function config<T>(key: string, fallback: T): string | T;

/** This plugin's durable state: survives reloads and restarts. */
export const state: {
  get(key: string): Uint8Array | undefined;
  getText(key: string): string | undefined;
  /** Throws HostError over the plugin's state budget or while the disk cannot write. */
  set(key: string, value: string | Uint8Array): void;
  delete(key: string): void;
};

/** Marks this VM ready or not on /readyz (needs `readiness = true`). */
export function setReady(ready: boolean): void;

/** What the load balancers probing /readyz have seen since the VM was marked not ready. */
export interface DrainProgress {
  probers: number;
  probersDrained: number;
  drainedForMs: number | undefined;
  notReadyForMs: number | undefined;
}
/** Drain progress for load balancers that take a VM out after `unhealthyThreshold` failed
 * probes in a row (needs `readiness = true`). */
export function drainProgress(unhealthyThreshold: number): DrainProgress;

/** An HTTP answer. */
export interface HttpResponse {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
  /** 2xx. */
  ok: boolean;
  /** The body as UTF-8 text. */
  text(): string;
}
/** Outbound HTTP to the hosts on the manifest's `[capabilities] http` allow-list. */
export const http: {
  send(
    method: string,
    url: string,
    options?: { headers?: [string, string][]; body?: string | Uint8Array },
  ): HttpResponse;
  get(url: string): HttpResponse;
  post(url: string, body: string | Uint8Array, contentType?: string): HttpResponse;
};

/** What an operator-defined action did. */
export interface ActionOutput {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
}
/** Runs an action granted to this plugin (`[capabilities] actions`) and defined by the
 * operator (`[actions.NAME]` in the daemon config). */
export function runAction(name: string): ActionOutput;

/** The VM's Azure managed identity (`[capabilities] azure-identity`). */
export const identity: {
  /** The resource of Azure Storage. */
  STORAGE: string;
  accessToken(resource: string): {
    token: string;
    expiresOnUnixMs: number;
    bearer(): string;
  };
};

/** The plugin's answer to each call. */
export type OnEvent = (event: ScheduledEvent, phase: Phase, ctx: Context) => Decision;
/** What the plugin does when the daemon (re)loads it. */
export type OnStart = (ctx: StartContext) => void;

/** Makes the component's `handler` export from plain functions. */
export function handler(
  onEvent: OnEvent,
  onStart?: OnStart,
): {
  onStart(ctx: StartContext): void;
  onEvent(event: ScheduledEvent, phase: Phase, ctx: Context): Decision;
};
