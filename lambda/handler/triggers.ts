/** Which of the handler's four triggers an event is. */
import type { ScheduledEvent, SQSEvent } from 'aws-lambda';
import { IndexerError } from '../lib/errors';
import { checkNamespaceName } from '../lib/names';

/** A direct invoke: report drift (`check`, writes nothing) or repair it, for every root or one. */
export interface InvokeRequest {
  readonly action: 'check' | 'repair';
  /** One configured root; all of them when absent. */
  readonly prefix?: string;
  /** One namespace of the root(s); the root's own index and every namespace when absent. */
  readonly namespace?: string;
}

/** The trigger of an invocation. */
export type Trigger =
  | { readonly kind: 'sqs'; readonly event: SQSEvent }
  | { readonly kind: 'schedule'; readonly event: ScheduledEvent }
  | { readonly kind: 'invoke'; readonly request: InvokeRequest };

/** The event is none of the handler's triggers, or a malformed direct invoke. */
export class UnknownTriggerError extends IndexerError {
  override name = 'UnknownTriggerError';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const INVOKE_KEYS = new Set(['action', 'prefix', 'namespace']);
const INVOKE_EXAMPLE = 'Example: {"action":"check","prefix":"swamp"}';

function invokeRequestOf(event: Record<string, unknown>): InvokeRequest {
  for (const key of Object.keys(event)) {
    if (!INVOKE_KEYS.has(key)) throw new UnknownTriggerError(`Unknown key "${key}" in a direct invoke`, INVOKE_EXAMPLE);
  }
  const { action, prefix, namespace } = event;
  if (action !== 'check' && action !== 'repair')
    throw new UnknownTriggerError(`"action" must be "check" or "repair", got ${JSON.stringify(action)}`, INVOKE_EXAMPLE);
  if (prefix !== undefined && typeof prefix !== 'string') throw new UnknownTriggerError('"prefix" must be a string', INVOKE_EXAMPLE);
  if (namespace !== undefined && typeof namespace !== 'string')
    throw new UnknownTriggerError('"namespace" must be a string', INVOKE_EXAMPLE);
  // The library's rule, so that the command and the handler refuse the same names (`.` and `..` among them).
  if (namespace !== undefined) checkNamespaceName(namespace, '"namespace"');
  return { action, prefix, namespace };
}

/**
 * Decides the trigger: an SQS batch (`Records` from `aws:sqs`), an EventBridge scheduled event
 * (`source: aws.events`, `detail-type: Scheduled Event`), or a direct invoke (`{action, prefix?, namespace?}`).
 * Anything else throws `UnknownTriggerError`.
 */
export function triggerOf(event: unknown): Trigger {
  if (!isRecord(event)) throw new UnknownTriggerError('The event is not a JSON object');
  if (Array.isArray(event.Records)) {
    const records = event.Records as unknown[];
    if (records.every((r) => isRecord(r) && r.eventSource === 'aws:sqs')) return { kind: 'sqs', event: event as unknown as SQSEvent };
    throw new UnknownTriggerError('Records that are not from SQS', 'Deliver S3 events through the queue, not straight to the function');
  }
  if (event.source === 'aws.events' && event['detail-type'] === 'Scheduled Event') {
    return { kind: 'schedule', event: event as unknown as ScheduledEvent };
  }
  if ('action' in event) return { kind: 'invoke', request: invokeRequestOf(event) };
  throw new UnknownTriggerError('The event is neither an SQS batch, a scheduled event nor a direct invoke', INVOKE_EXAMPLE);
}
