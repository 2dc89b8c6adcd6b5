/** Namespaces the role may not write (not in the construct's `namespaces` prop): counted and logged, never written. */
import { type DatastoreRoot, describeScope } from '../lib';
import { isNamespaceListed } from './config';
import { Metric, count, logger } from './observability';
import type { Runtime } from './runtime';

/** What the log line and the refused invoke say about an unlisted namespace. */
export function unlistedMessage(root: DatastoreRoot, ns: string): string {
  return (
    `namespace "${ns}" of ${describeScope({ root })} is not in the construct's \`namespaces\` prop (DATASTORE_NAMESPACES): ` +
    `its index is not written; add "${root.prefix ? `${root.prefix}/` : ''}${ns}" to \`namespaces\` and deploy`
  );
}

/**
 * A test for one invocation: true when namespace `ns` of `root` must be skipped. The first time a namespace
 * is met it is counted (`NamespacesUnlisted`) and logged, naming the scope and the prop; the root's own index
 * and the listed namespaces are kept as usual.
 */
export function unlistedNamespaces(rt: Runtime, root: DatastoreRoot): (ns: string) => boolean {
  const met = new Set<string>();
  return (ns) => {
    if (isNamespaceListed(rt.config, root, ns)) return false;
    if (!met.has(ns)) {
      met.add(ns);
      count(Metric.NamespacesUnlisted, 1);
      logger.error(unlistedMessage(root, ns), { scope: describeScope({ root, namespace: ns }), prop: 'namespaces' });
    }
    return true;
  };
}
