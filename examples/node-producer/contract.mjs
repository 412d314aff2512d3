// What claimlog's write contract computes, with node:crypto only (docs/events.md, "Writing from any
// language" and "Signatures"): event ids, message ids, the hash of stored bytes, and the one Ed25519
// signature over the Merkle root of an append's events. tests/contract/signing_vectors.json holds the
// values claimlog's Python code computes for a few events; the contract test checks these reproduce them.
import { createHash, createPrivateKey, createPublicKey, randomBytes, sign } from "node:crypto";
import { readFileSync } from "node:fs";

const MESSAGE_ID_NAMESPACE = "0d7c4f3e-9a52-5b1e-8c47-2f6e1a9b3d80"; // services/log/writer.py
const CONTEXT = Buffer.from("claimlog/v1\0"); // what the signature covers: this, then the root
const LEAF = Buffer.from([0]);
const NODE = Buffer.from([1]);
const MAX_SIGNED = 100_000; // the largest set one signature may cover

const sha256 = (...parts) => parts.reduce((hash, part) => hash.update(part), createHash("sha256")).digest();

function uuidText(bytes) {
  const hex = bytes.toString("hex");
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20, 32)].join("-");
}

function withVersion(bytes, version) {
  bytes[6] = (bytes[6] & 0x0f) | (version << 4);
  bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562 variant
  return uuidText(bytes);
}

/** A time-ordered UUIDv7, the event id: 48 bits of Unix milliseconds, then random bits. */
export function uuidv7() {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(Date.now(), 0, 6);
  return withVersion(bytes, 7);
}

/**
 * The event's Nats-Msg-Id: the UUIDv5 of `<actor id>\0<claim id>\0<event id>`. JetStream deduplicates
 * message ids across the whole stream; derived from who writes and where, one can only collide with a
 * retry of the same event, never with another writer's.
 */
export function messageId(event) {
  const name = `${event.actor.id}\0${event.claim_id}\0${event.event_id}`;
  const namespace = Buffer.from(MESSAGE_ID_NAMESPACE.replaceAll("-", ""), "hex");
  return withVersion(createHash("sha1").update(namespace).update(name, "utf8").digest().subarray(0, 16), 5);
}

/** The hex SHA-256 of an event's exact stored bytes: the next event of its claim records it as prev_hash. */
export const eventHash = (data) => sha256(data).toString("hex");

/**
 * The Merkle root over events' SHA-256 hashes and each event's path to it (sibling hashes from the leaf
 * up). A leaf is SHA-256(0x00 + hash), a node SHA-256(0x01 + left + right); a level of odd length
 * carries its last node up unchanged.
 */
export function merkle(hashes) {
  let level = hashes.map((hash) => sha256(LEAF, hash));
  const paths = hashes.map(() => []);
  const positions = hashes.map((_, index) => index);
  while (level.length > 1) {
    positions.forEach((position, event) => {
      if ((position ^ 1) < level.length) paths[event].push(level[position ^ 1]);
      positions[event] = position >> 1;
    });
    const up = [];
    for (let i = 0; i < level.length; i += 2) up.push(i + 1 < level.length ? sha256(NODE, level[i], level[i + 1]) : level[i]);
    level = up;
  }
  return { root: level[0], paths };
}

/** A signer from an unencrypted PEM (PKCS#8) Ed25519 private key, as `claimlog actors key add --out` writes it. */
export function signerFromPem(pem, where = "the signing key") {
  let privateKey;
  try {
    privateKey = createPrivateKey(pem);
  } catch (error) {
    throw new Error(`${where}: not an unencrypted PEM private key (${error.message})`);
  }
  if (privateKey.asymmetricKeyType !== "ed25519") {
    throw new Error(`${where}: a ${privateKey.asymmetricKeyType} key, not an Ed25519 key`);
  }
  // The key id: the first 32 hex digits of the SHA-256 of the raw 32-byte public key (the JWK's x).
  const raw = Buffer.from(createPublicKey(privateKey).export({ format: "jwk" }).x, "base64url");
  return { keyId: sha256(raw).toString("hex").slice(0, 32), privateKey };
}

/** The signer whose key file CLAIMLOG_SIGNING_KEY names (as for claimlog's own processes). */
export function signerFromFile(path) {
  let pem;
  try {
    pem = readFileSync(path);
  } catch (error) {
    throw new Error(`signing key ${path}: ${error.code === "ENOENT" ? "no such file" : error.message}`);
  }
  return signerFromPem(pem, `signing key ${path}`);
}

/**
 * The signature headers of each event of one append (their exact stored bytes, in order): one signature
 * over the root of all of them, and each event's own place and path to it, so that any reader checks
 * every event on its own.
 */
export function signatureHeaders(signer, datas) {
  if (datas.length < 1 || datas.length > MAX_SIGNED) {
    throw new Error(`one signature covers 1 to ${MAX_SIGNED} events, got ${datas.length}`);
  }
  const { root, paths } = merkle(datas.map((data) => sha256(data)));
  const signature = `v1.${sign(null, Buffer.concat([CONTEXT, root]), signer.privateKey).toString("base64url")}`;
  return paths.map((path, index) => ({
    "Claimlog-Signer": signer.keyId,
    "Claimlog-Signature": signature,
    "Claimlog-Proof": `${index}/${datas.length}` + (path.length ? `;${path.map((h) => h.toString("base64url")).join(",")}` : ""),
  }));
}
