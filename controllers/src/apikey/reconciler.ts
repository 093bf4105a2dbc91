// ApiKey reconciler. The key is generated here, written to the Secret first (so a key is never in
// PostgreSQL without its only copy existing), then its sha256 goes into api_keys through the same
// operations the admin API uses; the change_log trigger notifies every API and gateway cache.
// Crash-safe: a key already in the Secret for the current rotation is reused, and a key whose
// hash is already in api_keys is adopted rather than issued twice. Status counts the API and
// gateway processes whose cache version has reached the change (cache_acks, decisions.md).
import { AppError } from '#common/errors.ts';
import { createNamedKey, regeneratePrimaryKey, revokeKey, type CreatedKey } from '#common/accounts/keys.ts';
import type { AuditActor } from '#common/audit/record.ts';
import { countCacheAcks } from '#common/db/changes.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { API_KEY_PATTERN, describeApiKey, issueApiKey, type IssuedKey } from '#common/secrets.ts';
import { findCondition, setConditions, transitions, type ConditionInput } from '../runtime/conditions.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { addFinalizer, hasFinalizer, removeFinalizer } from '../runtime/finalizers.ts';
import type { Informer } from '../runtime/informer.ts';
import { KubeApiError, type KubeClient, type KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { isPaused, recordResumed, reportPaused, resumedConditions } from '../runtime/pause.ts';
import { applyStatus, rfc3339 } from '../runtime/status.ts';
import { API_KEY, API_VERSION, FIELD_MANAGER, MANAGED_BY, MANAGED_BY_LABEL } from '../crds/resources.ts';
import type { ApiKey, ApiKeyStatus } from '../crds/types.generated.ts';
import {
  changeLogHead,
  deleteMapping,
  findKeyByHash,
  readMapping,
  saveMapping,
  setMappingChange,
  type Mapping,
} from './store.ts';

export const APIKEY_FINALIZER = 'proxyfleet.io/api-key';
const APIKEY_LABEL = 'proxyfleet.io/apikey';
const ROTATION_ANNOTATION = 'proxyfleet.io/rotation';
const OWNER_UID_ANNOTATION = 'proxyfleet.io/apikey-uid';
/** How often status is refreshed while caches catch up, and once they have. */
export const SYNC_POLL_MS = 1_000;
export const SYNCED_REFRESH_MS = 30_000;
/** Retry for conditions a person must fix (key limit, unknown account): not an error backoff. */
export const BLOCKED_RETRY_MS = 30_000;
/**
 * The label binding a namespace to one account: its ApiKeys may act on that account only. Only
 * whoever may edit the Namespace object (a cluster-scoped write, usually the cluster admin) can
 * set it, so rights in a namespace never reach another customer's keys.
 */
export const ACCOUNT_ID_LABEL = 'proxyfleet.io/account-id';

interface Secret extends KubeObject {
  data?: Record<string, string>;
}

export interface ApiKeyReconcilerDeps {
  client: KubeClient;
  pool: Pool;
  apiKeys: Informer<ApiKey>;
  recorder: EventRecorder;
  logger: Logger;
  /** The operator's own namespace (PROXYFLEET_NAMESPACE): its ApiKeys may name any account. */
  operatorNamespace?: string;
}

const keyName = (ak: ApiKey) => (ak.spec.type === 'Primary' ? 'primary' : ak.spec.name!);
const fingerprint = (hash: Buffer) => `sha256:${hash.toString('hex').slice(0, 16)}`;
/** The audit log's actor of what this controller does to keys (docs/security.md "Audit log"). */
const controllerActor = (ak: ApiKey): AuditActor => ({
  kind: 'system',
  id: `apikey-controller ${ak.metadata.namespace ?? ''}/${ak.metadata.name ?? ''}`,
});

export function apiKeyReconciler(
  deps: ApiKeyReconcilerDeps,
): (key: string) => Promise<ReconcileResult | void> {
  const { client, pool, recorder, logger } = deps;

  return async (key) => {
    const cached = deps.apiKeys.get(key);
    if (!cached) return;
    const uid = cached.metadata.uid!;
    const namespace = cached.metadata.namespace!;
    if (cached.metadata.deletionTimestamp) {
      if (hasFinalizer(cached, APIKEY_FINALIZER)) {
        const mapping = await readMapping(pool, uid);
        if (mapping?.apiKeyId)
          await revokeKey(pool, cached.spec.accountId, mapping.apiKeyId, controllerActor(cached));
        await deleteOwnSecret(cached);
        await deleteMapping(pool, uid);
        await removeFinalizer(client, API_KEY, cached, APIKEY_FINALIZER);
        logger.info({ apiKey: key }, 'api key revoked on deletion');
      }
      return;
    }
    // Paused (pause.ts): no key issued, rotated or revoked; deletion above still revokes.
    if (isPaused(cached)) return reportPaused(client, API_KEY, cached, recorder, FIELD_MANAGER);
    // Before anything is written (finalizer, Secret, api_keys): may this namespace act on the account?
    if (!(await accountBound(namespace, cached.spec.accountId))) {
      await report(cached, await readMapping(pool, uid), {
        type: 'Ready',
        status: 'False',
        reason: 'AccountNotBoundToNamespace',
        message: `namespace ${namespace} is not bound to account ${cached.spec.accountId}: its label ${ACCOUNT_ID_LABEL} must equal spec.accountId`,
      });
      return { requeueAfterMs: BLOCKED_RETRY_MS };
    }
    const ak = await addFinalizer(client, API_KEY, cached, APIKEY_FINALIZER);
    let mapping = await readMapping(pool, uid);

    if (ak.spec.revoked) {
      if (mapping?.apiKeyId && mapping.key && !mapping.key.revokedAt) {
        await revokeKey(pool, ak.spec.accountId, mapping.apiKeyId, controllerActor(ak));
        await setMappingChange(pool, uid, await changeLogHead(pool));
        await recorder.record(
          ak,
          'Normal',
          'Revoked',
          `key ${mapping.key.prefix}… revoked; it fails on the REST API`,
        );
        mapping = await readMapping(pool, uid);
      }
      await deleteOwnSecret(ak);
      return report(ak, mapping, {
        type: 'Ready',
        status: 'False',
        reason: 'Revoked',
        message: 'the key is revoked; create a new ApiKey for a new key',
      });
    }

    const needNew = !mapping || mapping.rotation < ak.spec.rotation;
    if (!needNew) {
      if (!mapping!.key || mapping!.key.revokedAt) {
        return report(ak, mapping, {
          type: 'Ready',
          status: 'False',
          reason: 'RevokedOutsideOperator',
          message:
            'the key was revoked or replaced outside Kubernetes (admin API); raise spec.rotation to issue a new one',
        });
      }
      const secret = await client.get<Secret>(RESOURCES.secret, namespace, ak.spec.secretRef.name);
      const stored = secret?.data?.[ak.spec.secretRef.key];
      const matches =
        stored !== undefined &&
        describeApiKey(Buffer.from(stored, 'base64').toString()).hash.equals(mapping!.key.hash);
      if (!matches) {
        return report(ak, mapping, {
          type: 'Ready',
          status: 'False',
          reason: secret ? 'SecretMismatch' : 'SecretMissing',
          message: `Secret ${ak.spec.secretRef.name} no longer holds the key (only its hash is stored); raise spec.rotation to issue a new one`,
        });
      }
      return report(ak, mapping, readyCondition(ak, mapping!));
    }

    // A new key: first its only copy in the Secret, then its hash in PostgreSQL. The Secret must
    // be ours or absent: never take over the database credentials or another ApiKey's key.
    const foreign = await foreignSecret(ak);
    if (foreign) {
      await report(ak, mapping, {
        type: 'Ready',
        status: 'False',
        reason: 'SecretNotOwned',
        message: `Secret ${ak.spec.secretRef.name} exists and was not created by this ApiKey (${foreign}); it is left untouched: choose another spec.secretRef.name`,
      });
      return { requeueAfterMs: BLOCKED_RETRY_MS };
    }
    const issued = await keyForRotation(ak);
    let created: CreatedKey | { id: string };
    try {
      const existing = await findKeyByHash(pool, issued.hash);
      if (existing && existing.accountId === ak.spec.accountId && !existing.revokedAt) {
        created = { id: existing.id }; // issued by an earlier attempt that stopped before the mapping
      } else if (ak.spec.type === 'Primary') {
        created = await regeneratePrimaryKey(pool, ak.spec.accountId, issued, controllerActor(ak));
      } else {
        if (mapping?.apiKeyId && mapping.key && !mapping.key.revokedAt)
          await revokeKey(pool, ak.spec.accountId, mapping.apiKeyId, controllerActor(ak));
        created = await createNamedKey(pool, ak.spec.accountId, keyName(ak), issued, controllerActor(ak));
      }
    } catch (err) {
      if (err instanceof AppError && BLOCKING_ERRORS[err.code]) {
        const reason = BLOCKING_ERRORS[err.code]!;
        await report(ak, mapping, { type: 'Ready', status: 'False', reason, message: err.message });
        return { requeueAfterMs: BLOCKED_RETRY_MS };
      }
      throw err;
    }
    await saveMapping(pool, {
      uid,
      namespace,
      name: ak.metadata.name,
      accountId: ak.spec.accountId,
      apiKeyId: created.id,
      rotation: ak.spec.rotation,
      changeId: await changeLogHead(pool),
    });
    const first = !mapping;
    mapping = await readMapping(pool, uid);
    await recorder.record(
      ak,
      'Normal',
      first ? 'KeyIssued' : 'KeyRotated',
      `key ${issued.prefix}… written to Secret ${ak.spec.secretRef.name}`,
    );
    return report(ak, mapping, readyCondition(ak, mapping!));
  };

  /** Why the Secret named by the ApiKey is not its own, or undefined when it is absent or ours. */
  async function foreignSecret(ak: ApiKey): Promise<string | undefined> {
    const secret = await client.get<Secret>(RESOURCES.secret, ak.metadata.namespace, ak.spec.secretRef.name);
    if (!secret) return undefined;
    const owner = secret.metadata.ownerReferences?.find((r) => r.controller === true);
    if (owner?.uid === ak.metadata.uid) return undefined;
    return owner ? `its controller is ${owner.kind} ${owner.name}` : 'it has no controller owner';
  }

  /** Deletes the key's Secret only if this ApiKey owns it (uid precondition: never a same-name newcomer). */
  async function deleteOwnSecret(ak: ApiKey): Promise<void> {
    const namespace = ak.metadata.namespace!;
    const secret = await client.get<Secret>(RESOURCES.secret, namespace, ak.spec.secretRef.name);
    if (!secret) return;
    const ours = secret.metadata.ownerReferences?.some(
      (r) => r.controller === true && r.uid === ak.metadata.uid,
    );
    if (!ours) return;
    try {
      await client.delete(RESOURCES.secret, namespace, ak.spec.secretRef.name, { uid: secret.metadata.uid });
    } catch (err) {
      // The cluster-wide install has no delete on Secrets: empty the key instead (a deleted
      // ApiKey's Secret then goes by garbage collection, through its owner reference).
      if (!(err instanceof KubeApiError && err.status === 403)) throw err;
      if (secret.data?.[ak.spec.secretRef.key] === undefined) return;
      await client.mergePatch(RESOURCES.secret, namespace, ak.spec.secretRef.name, {
        metadata: { resourceVersion: secret.metadata.resourceVersion },
        data: null,
      });
    }
  }

  /** The operator's namespace, or a namespace labelled with exactly this account id. */
  async function accountBound(namespace: string, accountId: string): Promise<boolean> {
    if (deps.operatorNamespace !== undefined && namespace === deps.operatorNamespace) return true;
    const ns = await client.get(RESOURCES.namespace, undefined, namespace);
    return ns?.metadata.labels?.[ACCOUNT_ID_LABEL] === accountId;
  }

  /** The key for spec.rotation: the one already in the Secret for it (an interrupted attempt), else a new one written there. */
  async function keyForRotation(ak: ApiKey): Promise<IssuedKey> {
    const namespace = ak.metadata.namespace!;
    const secret = await client.get<Secret>(RESOURCES.secret, namespace, ak.spec.secretRef.name);
    const annotations = secret?.metadata.annotations ?? {};
    const data = secret?.data?.[ak.spec.secretRef.key];
    const stored = data && Buffer.from(data, 'base64').toString();
    if (
      stored &&
      API_KEY_PATTERN.test(stored) &&
      annotations[ROTATION_ANNOTATION] === String(ak.spec.rotation) &&
      annotations[OWNER_UID_ANNOTATION] === ak.metadata.uid
    ) {
      const pending = describeApiKey(stored);
      const row = await findKeyByHash(pool, pending.hash);
      if (!row || (!row.revokedAt && row.accountId === ak.spec.accountId)) return pending;
    }
    const issued = issueApiKey();
    const object = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: ak.spec.secretRef.name,
        namespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [APIKEY_LABEL]: ak.metadata.name },
        annotations: {
          [ROTATION_ANNOTATION]: String(ak.spec.rotation),
          [OWNER_UID_ANNOTATION]: ak.metadata.uid!,
        },
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind: 'ApiKey',
            name: ak.metadata.name,
            uid: ak.metadata.uid!,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      type: 'Opaque',
      data: { [ak.spec.secretRef.key]: Buffer.from(issued.key).toString('base64') },
    } as KubeObject;
    // Absent: create, which fails if another writer created it meanwhile (no silent overwrite).
    if (!secret) await client.create(RESOURCES.secret, object);
    else await client.apply(RESOURCES.secret, object, { fieldManager: FIELD_MANAGER, force: true });
    return issued;
  }

  function readyCondition(ak: ApiKey, mapping: Mapping): ConditionInput {
    return {
      type: 'Ready',
      status: 'True',
      reason: 'KeyActive',
      message: `key ${mapping.key?.prefix ?? ''}… is active; Secret ${ak.spec.secretRef.name} holds it`,
    };
  }

  async function report(
    ak: ApiKey,
    mapping: Mapping | undefined,
    ready: ConditionInput,
  ): Promise<ReconcileResult> {
    const version = mapping?.changeId ?? 0;
    const [api, gateway] = await Promise.all([
      countCacheAcks(pool, 'api', version),
      countCacheAcks(pool, 'gateway', version),
    ]);
    const allSynced = api.synced === api.total && gateway.synced === gateway.total;
    const synced: ConditionInput = !mapping?.changeId
      ? { type: 'Synced', status: 'Unknown', reason: 'NoChange', message: 'no key change has been made yet' }
      : allSynced
        ? {
            type: 'Synced',
            status: 'True',
            reason: 'CachesCurrent',
            message: `every running API (${api.total}) and gateway (${gateway.total}) pod has the change`,
          }
        : {
            type: 'Synced',
            status: 'False',
            reason: 'Propagating',
            message: `${api.synced}/${api.total} API and ${gateway.synced}/${gateway.total} gateway pods have the change`,
          };
    const conditions = setConditions(
      ak.status?.conditions,
      [ready, synced, ...resumedConditions(ak.status?.conditions)],
      ak.metadata.generation,
    );
    const status: Partial<ApiKeyStatus> = {
      observedGeneration: ak.metadata.generation ?? 0,
      keyName: keyName(ak),
      observedRotation: mapping?.rotation ?? 0,
      apiPods: api,
      gatewayPods: gateway,
      synced: `api ${api.synced}/${api.total}, gw ${gateway.synced}/${gateway.total}`,
      conditions,
      ...(mapping?.apiKeyId ? { keyId: mapping.apiKeyId } : {}),
      ...(mapping?.key ? { prefix: mapping.key.prefix, fingerprint: fingerprint(mapping.key.hash) } : {}),
      ...(mapping ? { lastRotationTime: rfc3339(mapping.rotatedAt) } : {}),
      ...(mapping?.changeId ? { changeId: mapping.changeId } : {}),
    };
    await applyStatus(client, API_KEY, ak, status, FIELD_MANAGER);
    await recordResumed(recorder, ak);
    for (const c of transitions(ak.status?.conditions, conditions)) {
      if (c.type === 'Ready' && c.status === 'False' && c.reason !== 'Revoked')
        await recorder.record(ak, 'Warning', c.reason, c.message);
      if (c.type === 'Synced' && c.status === 'True' && findCondition(ak.status?.conditions, 'Synced')) {
        await recorder.record(ak, 'Normal', 'Synced', c.message);
      }
    }
    return { requeueAfterMs: allSynced ? SYNCED_REFRESH_MS : SYNC_POLL_MS };
  }
}

/** Errors a person must resolve: reported as Ready=False with this reason, retried slowly. */
const BLOCKING_ERRORS: Partial<Record<AppError['code'], string>> = {
  NAMED_KEY_LIMIT: 'NamedKeyLimit',
  KEY_NAME_TAKEN: 'KeyNameTaken',
  ACCOUNT_NOT_FOUND: 'AccountNotFound',
};
