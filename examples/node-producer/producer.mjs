#!/usr/bin/env node
// Drafts a claim and attaches one source to it on the claimlog stream, from Node.js.
//
//   CLAIMLOG_SIGNING_KEY=producer.pem node producer.mjs nats://[producer:password@]host:4222 CLM-0001234
//
// It writes exactly as claimlog's own log module does: a message id derived from the actor, the claim
// and the event id (a retry is stored once), the claim's expected last sequence (of two racing writers
// one is refused), the SHA-256 of the claim's previous stored message as prev_hash, each append signed
// with the producer's own key (contract.mjs), and a checked acknowledgement.
import { ErrorCode, connect, headers } from "nats";
import { eventHash, messageId, signatureHeaders, signerFromFile, uuidv7 } from "./contract.mjs";

const STREAM = process.env.CLAIMLOG_STREAM ?? "CLAIMS";
const PREFIX = process.env.CLAIMLOG_SUBJECT_PREFIX ?? "claims";
// The stream stores claims.<claim>.<Type> as claims.<partition>.<claim>.<Type> (the server computes the
// partition); a stream made before partitions (CLAIMLOG_PARTITIONS=0) stores it as published.
const PARTITIONED = (process.env.CLAIMLOG_PARTITIONS ?? "16") !== "0";
// The producer's private key, registered with `claimlog actors key add node-producer --out FILE`. Without
// it the events are unsigned: readable only while the registry does not require signatures.
const SIGNING_KEY = process.env.CLAIMLOG_SIGNING_KEY || null;
const ACTOR = { id: "node-producer", kind: "service" }; // a model would be { id, kind: "model", model: "name-1" }
const WRONG_LAST_SEQUENCE = 10071;

const claimFilter = (claimId) => (PARTITIONED ? `${PREFIX}.*.${claimId}.*` : `${PREFIX}.${claimId}.*`);

/**
 * nats.js ignores credentials in a URL, so they are taken out and passed as options. A claimlog user
 * (the `producer` role) may subscribe to replies under `_INBOX.<user>` only, so its requests ask for
 * their answers there: with nats.js's default `_INBOX` prefix no answer would reach it.
 */
function connectOptions(url) {
  const servers = url.split(",").map((s) => new URL(s.includes("://") ? s.trim() : `nats://${s.trim()}`));
  const withUser = servers.find((server) => server.username);
  const user = withUser ? decodeURIComponent(withUser.username) : null;
  const credentials = user ? { user, pass: decodeURIComponent(withUser.password), inboxPrefix: `_INBOX.${user}` } : {};
  return { servers: servers.map((server) => server.host), name: "claimlog-node-producer", ...credentials };
}

function envelope(type, claimId, prevHash) {
  const occurred_at = new Date().toISOString();
  const event = { event_id: uuidv7(), type, schema_version: 1, claim_id: claimId, occurred_at, actor: ACTOR };
  return prevHash ? { ...event, prev_hash: prevHash } : event; // the first event of a claim has none
}

function claimDrafted(claimId) {
  return {
    ...envelope("ClaimDrafted", claimId, null),
    slug: claimId.toLowerCase(),
    statement: "Chain-of-thought prompting improves multi-step arithmetic accuracy of large language models.",
    capability: "Multi-step arithmetic reasoning",
    observed_on: "GSM8K, 8-shot, three model sizes.",
    origin_paper: "Wei et al. 2022, arXiv:2201.11903",
  };
}

function sourceAttached(claimId, prevHash) {
  return {
    ...envelope("SourceAttached", claimId, prevHash),
    source_id: "node-s1",
    relation: "supports",
    citation: "arXiv:2201.11903, table 2",
    measured: "Accuracy on GSM8K with and without chain-of-thought exemplars.",
  };
}

/** The claim's last stored message: its sequence and the hash of its exact bytes (0 and null if none). */
async function claimHead(jsm, claimId) {
  try {
    const last = await jsm.direct.getMessage(STREAM, { last_by_subj: claimFilter(claimId) });
    return { seq: last.seq, hash: eventHash(last.data) };
  } catch (error) {
    if (error.code === ErrorCode.JetStream404NoMessages) return { seq: 0, hash: null };
    throw error;
  }
}

/**
 * Publish one event if the claim's last stored event is still at expectedSeq, signed by signer (when
 * there is one) as an append of one event; throws if refused.
 */
async function append(js, event, expectedSeq, signer) {
  const subject = `${PREFIX}.${event.claim_id}.${event.type}`;
  const data = Buffer.from(JSON.stringify(event)); // the exact bytes stored, hashed and signed
  const h = headers();
  h.set("Nats-Expected-Last-Subject-Sequence-Subject", claimFilter(event.claim_id));
  if (signer) {
    const [signature] = signatureHeaders(signer, [data]);
    for (const [name, value] of Object.entries(signature)) h.set(name, value);
  }
  const msgID = messageId(event);
  let ack;
  try {
    ack = await js.publish(subject, data, {
      msgID,
      expect: { lastSubjectSequence: expectedSeq },
      headers: h,
    });
  } catch (error) {
    throw new Error(refusal(error, event, expectedSeq));
  }
  if (ack.stream !== STREAM) throw new Error(`${subject} was stored in stream ${ack.stream}, not ${STREAM}`);
  return { seq: ack.seq, duplicate: ack.duplicate, event_id: event.event_id, msg_id: msgID };
}

function refusal(error, event, expectedSeq) {
  const what = `${event.type} for ${event.claim_id}`;
  if (error.api_error?.err_code === WRONG_LAST_SEQUENCE) {
    return `${what} refused: the claim's last event is no longer at sequence ${expectedSeq} ` +
      `(${error.api_error.description}); another writer got there first, nothing was written`;
  }
  if (error.code === ErrorCode.NoResponders) return `${what}: no stream stores ${PREFIX}.> (is ${STREAM} created?)`;
  if (error.code === ErrorCode.Timeout) return `${what}: no acknowledgement; it may or may not be stored`;
  return `${what} refused: ${error.api_error?.description ?? error.message}`;
}

async function main([url, claimId]) {
  if (!url || !/^CLM-[0-9]{4,12}$/.test(claimId ?? "")) {
    throw new Error("usage: node producer.mjs NATS_URL CLAIM_ID   (e.g. nats://127.0.0.1:4222 CLM-0001234)");
  }
  const signer = SIGNING_KEY ? signerFromFile(SIGNING_KEY) : null; // a bad key file stops it before it connects
  const nc = await connect(connectOptions(url));
  try {
    const js = nc.jetstream();
    const jsm = await nc.jetstreamManager();
    const drafted = await append(js, claimDrafted(claimId), 0, signer); // 0: the claim must not exist yet
    const head = await claimHead(jsm, claimId); // normally the draft just stored
    const attached = await append(js, sourceAttached(claimId, head.hash), head.seq, signer);
    console.log(JSON.stringify({ claim_id: claimId, drafted, source_attached: attached }));
  } finally {
    await nc.close();
  }
}

main(process.argv.slice(2)).catch((error) => {
  console.error(`node-producer: ${error.message}`);
  process.exitCode = 1;
});
