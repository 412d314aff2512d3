// Command interop checks claimlog's transparency log formats with an implementation not written for
// claimlog: golang.org/x/mod/sumdb/tlog and note (Debian's golang-golang-x-mod-dev). It verifies the
// signatures and proofs claimlog made (claimlog_vectors.json) and writes the vectors the Go packages make
// from the same fixed inputs (go_vectors.json), which tests/unit/test_tlog_interop.py checks claimlog
// against. Run it with `make vectors`.
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const (
	logName     = "example.com/claimlog-interop"
	witnessName = "witness.example/interop"
	timestamp   = 1700000000
	maxSize     = 65537
)

var sizes = []int64{0, 1, 2, 3, 5, 8, 255, 256, 257, 1000, 65536, 65537}
var inclusions = [][2]int64{{0, 1}, {0, 2}, {1, 3}, {4, 8}, {255, 257}, {256, 257}, {70, 1000}, {999, 1000}, {65536, 65537}}
var consistencies = [][2]int64{{1, 2}, {1, 3}, {2, 3}, {3, 8}, {4, 8}, {255, 256}, {256, 257}, {257, 1000}, {1000, 65537}}

// entry is the fixed input both sides derive: claimlog regenerates it in Python.
func entry(i int64) []byte {
	return []byte(strings.Repeat(fmt.Sprintf("claimlog interop entry %d\n", i), int(1+i%3)))
}

func seed(label string) []byte { s := sha256.Sum256([]byte(label)); return s[:] }

func keyID(name string, typ byte, pub []byte) uint32 {
	h := sha256.Sum256(append(append([]byte(name+"\n"), typ), pub...))
	return binary.BigEndian.Uint32(h[:4])
}

// cosigner implements tlog-cosignature v1 over note.Signer / note.Verifier, with Go's crypto/ed25519.
type cosigner struct{ key ed25519.PrivateKey }

func (c cosigner) Name() string    { return witnessName }
func (c cosigner) KeyHash() uint32 { return keyID(witnessName, 4, c.key.Public().(ed25519.PublicKey)) }
func (c cosigner) Sign(msg []byte) ([]byte, error) {
	m := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", timestamp)), msg...)
	out := make([]byte, 8, 72)
	binary.BigEndian.PutUint64(out, timestamp)
	return append(out, ed25519.Sign(c.key, m)...), nil
}

type coverifier struct {
	name string
	pub  ed25519.PublicKey
}

func (v coverifier) Name() string    { return v.name }
func (v coverifier) KeyHash() uint32 { return keyID(v.name, 4, v.pub) }
func (v coverifier) Verify(msg, sig []byte) bool {
	if len(sig) != 72 {
		return false
	}
	m := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", binary.BigEndian.Uint64(sig[:8]))), msg...)
	return ed25519.Verify(v.pub, m, sig[8:])
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func hashes(p []tlog.Hash) []string {
	out := []string{}
	for _, h := range p {
		out = append(out, b64(h[:]))
	}
	return out
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(1)
	}
}

// c2spPath maps x/mod's tile path (tile/<H>/<L>/<N>, H always 8 here) onto tlog-tiles' (tile/<L>/<N>).
func c2spPath(t tlog.Tile) string {
	return strings.Replace(t.Path(), fmt.Sprintf("tile/%d/", t.H), "tile/", 1)
}

func main() {
	stored := []tlog.Hash{}
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := int64(0); i < maxSize; i++ {
		h, err := tlog.StoredHashes(i, entry(i), reader)
		must(err)
		stored = append(stored, h...)
	}
	roots := map[int64]tlog.Hash{}
	trees := []map[string]interface{}{}
	for _, n := range sizes {
		root := tlog.Hash(sha256.Sum256(nil))
		if n > 0 {
			r, err := tlog.TreeHash(n, reader)
			must(err)
			root = r
		}
		roots[n] = root
		tiles := map[string]string{}
		for _, t := range tlog.NewTiles(8, 0, n) {
			data, err := tlog.ReadTileData(t, reader)
			must(err)
			sum := sha256.Sum256(data)
			tiles[c2spPath(t)] = hex.EncodeToString(sum[:])
		}
		trees = append(trees, map[string]interface{}{"size": n, "root": b64(root[:]), "tiles": tiles})
	}

	logSeed := seed("claimlog interop log key")
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", logName, keyID(logName, 1, ed25519.NewKeyFromSeed(logSeed).Public().(ed25519.PublicKey)), b64(append([]byte{1}, logSeed...)))
	signer, err := note.NewSigner(skey)
	must(err)
	vkey, err := note.NewEd25519VerifierKey(logName, ed25519.NewKeyFromSeed(logSeed).Public().(ed25519.PublicKey))
	must(err)
	wkey := ed25519.NewKeyFromSeed(seed("claimlog interop witness key"))
	witness := cosigner{wkey}
	wvkey := fmt.Sprintf("%s+%08x+%s", witnessName, witness.KeyHash(), b64(append([]byte{4}, wkey.Public().(ed25519.PublicKey)...)))

	checkpoints := []map[string]interface{}{}
	for _, n := range []int64{0, 257, 65537} {
		root := roots[n]
		text := fmt.Sprintf("%s\n%d\n%s\n", logName, n, b64(root[:]))
		signed, err := note.Sign(&note.Note{Text: text}, signer, witness)
		must(err)
		checkpoints = append(checkpoints, map[string]interface{}{"size": n, "note": string(signed)})
	}

	incl := []map[string]interface{}{}
	for _, p := range inclusions {
		proof, err := tlog.ProveRecord(p[1], p[0], reader)
		must(err)
		rec := map[string]interface{}{"index": p[0], "size": p[1], "proof": hashes(proof)}
		if p[1] == 257 {
			r257 := roots[257]
			signed, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n257\n%s\n", logName, b64(r257[:]))}, signer, witness)
			must(err)
			lines := append([]string{"c2sp.org/tlog-proof@v1", fmt.Sprintf("index %d", p[0])}, hashes(proof)...)
			rec["tlog_proof"] = strings.Join(lines, "\n") + "\n\n" + string(signed)
		}
		incl = append(incl, rec)
	}
	cons := []map[string]interface{}{}
	for _, p := range consistencies {
		proof, err := tlog.ProveTree(p[1], p[0], reader)
		must(err)
		cons = append(cons, map[string]interface{}{"old": p[0], "new": p[1], "proof": hashes(proof)})
	}

	verifyClaimlog()

	out, err := json.MarshalIndent(map[string]interface{}{
		"implementation": "golang.org/x/mod/sumdb/tlog and note (Debian golang-golang-x-mod-dev), Go crypto/ed25519 for cosignature/v1",
		"log_vkey":       vkey,
		"log_skey_seed":  b64(logSeed),
		"witness_vkey":   wvkey,
		"witness_seed":   b64(seed("claimlog interop witness key")),
		"timestamp":      timestamp,
		"trees":          trees,
		"checkpoints":    checkpoints,
		"inclusion":      incl,
		"consistency":    cons,
	}, "", " ")
	must(err)
	must(os.WriteFile("go_vectors.json", append(out, '\n'), 0o644))
}

// verifyClaimlog checks what claimlog made from the same inputs: its vkeys parse, its notes open, its proofs check.
func verifyClaimlog() {
	raw, err := os.ReadFile("claimlog_vectors.json")
	must(err)
	var v struct {
		LogVkey     string `json:"log_vkey"`
		WitnessVkey string `json:"witness_vkey"`
		Checkpoints []struct {
			Size int64
			Note string
		} `json:"checkpoints"`
		Inclusion []struct {
			Index, Size int64
			Proof       []string
		} `json:"inclusion"`
		Consistency []struct {
			Old, New int64
			Proof    []string
		} `json:"consistency"`
	}
	must(json.Unmarshal(raw, &v))
	logv, err := note.NewVerifier(v.LogVkey)
	must(err)
	parts := strings.SplitN(v.WitnessVkey, "+", 3)
	wraw, err := base64.StdEncoding.DecodeString(parts[2])
	must(err)
	if len(parts) != 3 || wraw[0] != 4 || fmt.Sprintf("%08x", keyID(parts[0], 4, wraw[1:])) != parts[1] {
		must(fmt.Errorf("claimlog's witness vkey %q is malformed", v.WitnessVkey))
	}
	wv := coverifier{parts[0], ed25519.PublicKey(wraw[1:])}
	for _, c := range v.Checkpoints {
		n, err := note.Open([]byte(c.Note), note.VerifierList(logv, wv))
		must(err)
		if len(n.Sigs) != 2 {
			must(fmt.Errorf("claimlog's checkpoint of size %d: %d signatures verified, want 2", c.Size, len(n.Sigs)))
		}
	}
	reader := func(n int64) (tlog.HashReader, error) {
		stored := []tlog.Hash{}
		r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for i, x := range idx {
				out[i] = stored[x]
			}
			return out, nil
		})
		for i := int64(0); i < n; i++ {
			h, err := tlog.StoredHashes(i, entry(i), r)
			if err != nil {
				return nil, err
			}
			stored = append(stored, h...)
		}
		return r, nil
	}
	full, err := reader(maxSize)
	must(err)
	decode := func(p []string) []tlog.Hash {
		out := []tlog.Hash{}
		for _, s := range p {
			b, err := base64.StdEncoding.DecodeString(s)
			must(err)
			var h tlog.Hash
			copy(h[:], b)
			out = append(out, h)
		}
		return out
	}
	for _, p := range v.Inclusion {
		root, err := tlog.TreeHash(p.Size, full)
		must(err)
		must(tlog.CheckRecord(decode(p.Proof), p.Size, root, p.Index, tlog.RecordHash(entry(p.Index))))
	}
	for _, p := range v.Consistency {
		newRoot, err := tlog.TreeHash(p.New, full)
		must(err)
		oldRoot, err := tlog.TreeHash(p.Old, full)
		must(err)
		must(tlog.CheckTree(decode(p.Proof), p.New, newRoot, p.Old, oldRoot))
	}
	fmt.Printf("interop: claimlog's %d checkpoints, %d inclusion and %d consistency proofs verify with golang.org/x/mod\n",
		len(v.Checkpoints), len(v.Inclusion), len(v.Consistency))
}
