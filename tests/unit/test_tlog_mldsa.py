"""ML-DSA-44 cosignatures (C2SP tlog-cosignature type 0x06, as of commit 01194db11950a0ae2b2b2401afa0a4063a822458).

The signed message is rebuilt here from the spec's ``cosigned_message`` layout with ``struct``, not from
``tlog/``; the key id from the spec's formula with ``hashlib``. The vector at the end was made by another
implementation (filippo.io/torchwood with filippo.io/mldsa, in Go): its key from a seed, and its signature
over a checkpoint, must agree with ours.
"""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA44PublicKey

from tlog import TlogFormatError, VerificationError
from tlog.checkpoint import Checkpoint
from tlog.cosignature import (
    CosignatureVerifier,
    Cosigner,
    MLDSA44CosignatureVerifier,
    MLDSA44Cosigner,
    cosigned_message,
    timestamp_of,
)
from tlog.note import Signature, b64, open_note, unb64
from tlog.vkeys import parse_vkey

NAME = "witness.example/w1"
SEED = bytes(range(32))
CHECKPOINT = Checkpoint("example.com/behind-the-sofa", 20852163, bytes(range(100, 132)))
TIMESTAMP = 1_679_315_147


def spec_message(name: str, timestamp: int, origin: str, size: int, root: bytes) -> bytes:
    """``cosigned_message``: label[12], opaque cosigner_name<1..2^8-1>, uint64 timestamp, opaque log_origin<1..2^8-1>,
    uint64 start (0 for a checkpoint), uint64 end (the size), hash[32]; big-endian (RFC 8446, section 3)."""
    name_bytes, origin_bytes = name.encode(), origin.encode()
    return (
        struct.pack("12s", b"subtree/v1\n\x00")
        + struct.pack(f">B{len(name_bytes)}s", len(name_bytes), name_bytes)
        + struct.pack(">Q", timestamp)
        + struct.pack(f">B{len(origin_bytes)}s", len(origin_bytes), origin_bytes)
        + struct.pack(">QQ32s", 0, size, root)
    )


@pytest.fixture(scope="module")
def cosigner() -> MLDSA44Cosigner:
    return MLDSA44Cosigner(NAME, SEED)


def test_the_signed_message_is_the_specs_cosigned_message(cosigner):
    expected = spec_message(NAME, TIMESTAMP, CHECKPOINT.origin, CHECKPOINT.size, CHECKPOINT.root)
    assert len(expected) == 12 + 1 + len(NAME) + 8 + 1 + len(CHECKPOINT.origin) + 8 + 8 + 32
    assert cosigned_message(NAME, TIMESTAMP, CHECKPOINT.text()) == expected
    signature = cosigner.cosign(CHECKPOINT.text(), TIMESTAMP).signature
    MLDSA44PublicKey.from_public_bytes(cosigner.public).verify(signature[8:], expected)  # what is signed, byte for byte
    assert signature[:8] == struct.pack(">Q", TIMESTAMP) and len(signature) == 8 + 2420


def test_extension_lines_are_not_in_the_signed_message():
    extended = Checkpoint(CHECKPOINT.origin, CHECKPOINT.size, CHECKPOINT.root, ("an extension line",))
    assert cosigned_message(NAME, TIMESTAMP, extended.text()) == cosigned_message(NAME, TIMESTAMP, CHECKPOINT.text())


def test_the_key_id_is_the_specs_formula(cosigner):
    assert len(cosigner.public) == 1312
    expected = hashlib.sha256(NAME.encode() + b"\n" + b"\x06" + cosigner.public).digest()[:4]
    assert cosigner.key_id.to_bytes(4, "big") == expected
    key = base64.b64encode(bytes([0x06]) + cosigner.public).decode()
    assert cosigner.vkey() == f"{NAME}+{expected.hex()}+{key}"


def test_a_cosignature_verifies_with_the_parsed_vkey_and_carries_its_time(cosigner):
    verifier = parse_vkey(cosigner.vkey())
    assert isinstance(verifier, MLDSA44CosignatureVerifier) and verifier == cosigner.verifier()
    assert verifier.vkey() == cosigner.vkey() and verifier.key_id == cosigner.key_id
    line = cosigner.cosign(CHECKPOINT.text(), TIMESTAMP)
    assert line.key_id == cosigner.key_id
    note, verified = open_note(CHECKPOINT.text() + "\n" + line.line(), [verifier])
    assert [timestamp_of(s) for s in verified] == [TIMESTAMP]


@pytest.mark.parametrize(
    "changed",
    [
        Checkpoint(CHECKPOINT.origin, CHECKPOINT.size + 1, CHECKPOINT.root),
        Checkpoint(CHECKPOINT.origin, CHECKPOINT.size, bytes(32)),
        Checkpoint("example.com/another-log", CHECKPOINT.size, CHECKPOINT.root),
    ],
    ids=["size", "root", "origin"],
)
def test_a_cosignature_does_not_verify_for_another_checkpoint(cosigner, changed):
    signature = cosigner.cosign(CHECKPOINT.text(), TIMESTAMP).signature
    assert cosigner.verifier().verify(CHECKPOINT.text().encode(), signature)
    assert not cosigner.verifier().verify(changed.text().encode(), signature)


def test_a_cosignature_does_not_verify_at_another_time_or_under_another_name(cosigner):
    signature = cosigner.cosign(CHECKPOINT.text(), TIMESTAMP).signature
    text = CHECKPOINT.text().encode()
    assert not cosigner.verifier().verify(text, struct.pack(">Q", TIMESTAMP + 1) + signature[8:])
    assert not cosigner.verifier().verify(text, struct.pack(">Q", 1 << 63) + signature[8:])
    assert not MLDSA44CosignatureVerifier("witness.example/w2", cosigner.public).verify(text, signature)  # the name is signed
    assert not cosigner.verifier().verify(text, signature[:-1])


def test_ed25519_and_ml_dsa_verifiers_never_accept_each_others_cosignatures(cosigner):
    ed25519 = Cosigner(NAME, SEED)
    text = CHECKPOINT.text()
    mldsa_line, ed25519_line = cosigner.cosign(text, TIMESTAMP), ed25519.cosign(text, TIMESTAMP)
    assert mldsa_line.key_id != ed25519_line.key_id
    assert not ed25519.verifier().verify(text.encode(), mldsa_line.signature)
    assert not cosigner.verifier().verify(text.encode(), ed25519_line.signature)
    crossed = [Signature(NAME, ed25519.key_id, mldsa_line.signature), Signature(NAME, cosigner.key_id, ed25519_line.signature)]
    for line, verifier in zip(crossed, (ed25519.verifier(), cosigner.verifier()), strict=True):
        with pytest.raises(VerificationError, match="does not verify"):
            open_note(text + "\n" + line.line(), [verifier])
    _, verified = open_note(text + "\n" + ed25519_line.line() + mldsa_line.line(), [cosigner.verifier()])
    assert verified == [mldsa_line]
    assert isinstance(parse_vkey(ed25519.vkey()), CosignatureVerifier)


def test_the_private_key_is_its_seed_and_round_trips(cosigner):
    skey = cosigner.skey()
    name, hex_id, key = skey.removeprefix("PRIVATE+KEY+").split("+")
    assert (name, hex_id, unb64(key, what="key")) == (NAME, f"{cosigner.key_id:08x}", b"\x06" + SEED)
    again = MLDSA44Cosigner.from_skey(skey)
    assert again.public == cosigner.public and again.vkey() == cosigner.vkey()
    with pytest.raises(TlogFormatError, match="does not match"):
        MLDSA44Cosigner.from_skey(skey.replace(hex_id, "00000000"))
    with pytest.raises(TlogFormatError, match="not a type 0x06 ML-DSA-44 key .*type 0x04"):
        MLDSA44Cosigner.from_skey(Cosigner(NAME, SEED).skey())
    with pytest.raises(TlogFormatError, match="not a type 0x04 Ed25519 key .*type 0x06"):
        Cosigner.from_skey(skey)


def test_a_cosigner_refuses_a_time_of_zero_a_bad_seed_and_a_name_too_long():
    with pytest.raises(TlogFormatError, match="never 0"):
        MLDSA44Cosigner(NAME, SEED).cosign(CHECKPOINT.text(), 0)
    with pytest.raises(TlogFormatError, match="32 bytes, not 31"):
        MLDSA44Cosigner(NAME, SEED[:31])
    with pytest.raises(TlogFormatError, match="256 bytes"):
        MLDSA44Cosigner("w" * 256, SEED)


def mldsa_vkey(name: str, public: bytes, *, key_type: int = 0x06) -> str:
    """A vkey of ``public`` with the key id the spec's formula gives it, whatever the key's length."""
    key_id = hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public).digest()[:4]
    return f"{name}+{key_id.hex()}+{b64(bytes([key_type]) + public)}"


@pytest.mark.parametrize(
    ("vkey", "why"),
    [
        (lambda c: mldsa_vkey(NAME, c.public[:-1]), r"type 0x06 \(ML-DSA-44 cosigner\) key is 1312 bytes, not 1311"),
        (lambda c: mldsa_vkey(NAME, c.public + b"\x00"), "is 1312 bytes, not 1313"),
        (lambda c: mldsa_vkey(NAME, c.public[:32]), "is 1312 bytes, not 32"),
        (lambda c: c.vkey().replace(f"+{c.key_id:08x}+", "+00000000+"), "key id 00000000 does not match"),
        (lambda c: mldsa_vkey(NAME, c.public, key_type=0x07), "type 0x07: the known types are"),
    ],
    ids=["short", "long", "ed25519-sized", "wrong-key-id", "unknown-type"],
)
def test_a_malformed_ml_dsa_vkey_is_refused_saying_why(cosigner, vkey, why):
    with pytest.raises(TlogFormatError, match=why):
        parse_vkey(vkey(cosigner))


# From filippo.io/torchwood, cmd/litewitness/testdata/mldsa.txt (made by testdata/gentest/mldsa.go): an ML-DSA-44
# key made from a seed, and its cosignature (timestamp 0) of a checkpoint.
TORCHWOOD_SEED = bytes.fromhex("2886adc2b0eabfce67c0472939127998bf886cf256bfee8ba76a253fce1146e0")
TORCHWOOD_VKEY = (
    "example.com/mldsa-log+b5df45c5+BuhtcL97l3dcitjZ8Y9J54gmQ1TWn/BMF0yePKpTzhlFCkN6ouJDf+9kT9wve4/Y+JGXBUjlR"
    "vktAynZ6XOQSO+fOaxyPOQAwrtbZKYXnZWSQj9gHPz18q6brnckUv87Rsk/m5GIBvH8J3ymxZjUQS+DnAUIbctLsG2DD6I/ou0JtXpPL"
    "vfGhPDTkwc9QeFyBLBa02Pr9uuWCMohciLqRiFUo5+leUUDKba1g5TYjOjK/VKfntpdbEwoqhTJTG4armjUeXdrYDHeaaMaCAnW5F0lM"
    "WYsHjqzRpKjeTjgItseaWKSm+ga/mzTAgqsbo5Ob/AwaXf4Av7/mN+ZM6vHON/NE7Ip5vpXpCiNb9YbEQavn+fjNucFxffCacvzXghva"
    "aQ+3C/5h5lpR8jeajBFsFIOvdkYKizt29lCjqZDkYQgVfB9nWeH6rbayMkBdDpmRH03cI+urD0Eb5zvRuGJn3PgfwdyQJ3WcDH5Gqn5d"
    "kKs5NIVMBC+FfKeD47ruAIruda4JiiYCAxZbWgwzTI80N5lZFHEndmxKWaw6z/QyphuYkNyvZVZ0R3kH3JN4jdy9KKpNtFoQqnoBTGeE"
    "E/fXEEs5ByPlKnrrefRgWTqxssE4nPzHHr5GGgv/NKNTXNKI4LvNPH5yO3Vv/gIiDZxPPc1Jen8uKkmc0s3kT7XtcuWTlb+zdQeSme9O"
    "Dj0IoVu29Eav2OsGJpReX7vZx9i2fVfHEMHY5nFew8L5RxcWmZFFiYhMFZnLvk/SWmHcwr3DhzZchrODhabHQ+S6S49Ws+5aoBBPM3mO"
    "rSSKHgobdI7BJrdzdT07kjzyiyS9Gyv8iylUHHMuuh1O05RNRcX5SXmenwGDPcT9HuLS+hoesO0FQgEt+jAR7vVyUUU2C6g6FC6QNfHL"
    "/EUsulvYIAS5fOK7acOeVnoJlpI57Bq+uzLZm6g7IZD0xxQwZPYyT4ek99l9HxDSrVnU0rAr+Tq5vVh5YxvDkQVWroYIWek/AI5awjmh"
    "gpW4LPapBhLk2ipkF5CmU3T0cm3ET5f14gYQZfz23nCsmZ7qyqiQilgOxJzVYacVoGAStGzJNY1wEf26MADW5McyQzYI/3Fpaa4Ay6p2"
    "yFmcJMfpqZnu4flgWMqN1UpMbbJ6I7hOrCFWryExK/nvSbRrErHTkPz2wvVfI+enbFz86c0iNb7naQKv6LoIZYEHFOCEsWGL/sCChn6B"
    "R4nk1qAakyXEQwi96CkIa3AX562F8lhw6CU4x7T+NWqi2AWfEXImJenORhMP69hGIFsiLAVIjHtsWtJOi8cu+Brg1bFERkB4ryUTrLf/"
    "jFeb6KifZ+s8PZWclDaOLMINZ3E78a5u6AzgXpigJsAJ1A4BY89muedrW2O8kFyh3TTTKyY4kedCW6L+8bFHV2Gce25ZulNC1mZs41XA"
    "I9CteeYaWaiL7uGMXgyQ73wr4ftwAEMdsoQVQsQriutS1AhpBGvjzPCwD5LC5p1fa0WXBQ1puuaNqr3IJodmDLhEIAsZcv1gdXMg8EQg"
    "9QLqgLLrBijU3GxFUQllS8lpQ4TLwFYUJ41+qt28JEeky/VzSEeQd/qob8cbyNM44o7INB+lbhEXEGWvVO8Ak+uWMY+PRKeY9OQcE6E2"
    "7Nf3eUoHQXkwmXkjGgj0NKeXBIJc1k/Ws6WDbsU4graVKk5FQjwULcRngOpyiJQ/n8sObkAPXr+1rImK3lQJnxif/B6p5/tsh4rrcUht"
    "4yVIvFAaqsgAAE="
)
TORCHWOOD_CHECKPOINT = "example.com/mldsa-log\n1\n+zoErtsZtGO6sfiSV/v4UJSIyowisE8hvjw0q5+bD38=\n"
TORCHWOOD_LINE = (
    "\u2014 example.com/mldsa-log td9FxQAAAAAAAAAAkjFvCxC6244QGemHL0hurmk5M3Hj6noQQtBM1TiwnC1lFmT+t+cUG9W0ENl"
    "RQtV20lJFLKCzoJ08ulQEkfiVueKHeMyURh97Iup0R9d41Monv472jkyfDoX3ILyX/kEOuSV4Ed2tU4VmtDSbP0rofMWAbKJRMnzCpNI"
    "T5xMe3tRbWLVTvAtnX9OB4UMKL1dvGS/uuhqW9Ddjik2D8veitBvk3TbQcT8fanSyZqCbDZ5zzw5JS3Gu5oD1zK7z+KiyqbzKUhglESs"
    "7YXFbeU0E03FrXdAPYS6GAuZtBWTJp4DEm4rL+NqU6Xp0n2ehhqd1rFAJUAcsE5CFakQdlmKkkzVMy3VZYll5ptS0amlYfGqX6/N9bJA"
    "YdAoWWpdgCep5eXCutQcTQXc69UocKT99/vholeAP1097GfS+hNL2ndNS2ieMnj8XLD1LCHVoBjKZUIObB0lx3leGRe9VjYgTRAY2WlE"
    "+K32b6Iz1rKzzDD8YBNQdkHgdx44uPOU3I+8szYS6NzQ2Z0QlqAtz0j9vZu9yEUUxCEORAiMAHLtV5oWZ/RvSE7qq5B0b8WrHGPGoR/q"
    "UNK4ECmlIe/SRo6M7yRrPs3das3ox1bkC3f92c98ewHLeQtLwwsqQJny6rlYaiaiPMxgdT2CVcJEcKOfaK8pdy2fucBDxHrQitpGkeLJ"
    "LmWk6LLxR/Ut6s6xNyyKSuZlVslS40n9MJ837uMmJFyecKPliwAj8HzTWQywSkMpEQfJyr4i2Kfa2paOZ4izmotRTfdvbFWlWFwuGLWO"
    "Q0X/pKaExpdNDwqahAwbfGkw/iHbsV7ZIlNIuSNs2ccQvnjM8xqkT6sYYVxYiHpmk5sOwGsdeiMdwQqn7Q/Lz+uc3F6k/r0Ox7MJTX6f"
    "PhFdhe8RJg/77USR/MIGiT4YZHV+XgrtbV0jvMEgB4yEOircsScaBmLv18tTn1GiGlzFjK/s7gOzjk70jf1qCZ1MNgDAPstd/5sXdwYO"
    "N0FnA5zPUp9yMkq1/wZq+DuePQDT6nj8zgFrkrvl8s7nibKKaL2bKcje5YP3CFcXLZoESZnC3BJkV85VqXlAKl+dctM3vNfMVrqk3/bo"
    "BARw27mdKLsysIREkWR4caByW0csjL3Js9tn1hB0yf6hIGo8mvPIUjPIXn1rFSSKWkQlq15wu2gwEo9FdVF5beMdF4LVwuO9PZ1Y4oXu"
    "RE2pIzMWq/jEzHAZ7GucP7yzU78X767ucrwO/AXjMlLUsLLFZaQcHHBsrQJLpy5w1Jn/L7XFyR2g0lBOdT+lSOhx7j33oIlzxmqdR47o"
    "vtkg+LJpbAJG7n/JiQ/h/xffe3VdqSsrB8S4ltKz+rq51swoZ59zmRzWaoNkyWX0eu0E7y6EfpfrKEmr0H+fYtVnJvCznWFKzbv7oDXK"
    "C0pOyKZsNctvFwhSGEEURCs1G+4IrAEWG2Y231thQ8HdMvaMcm+ocvBGhZjmE7bXFkdiJ7S09csFjljFDGCiGRiU+flxkyiqpa1DDgeF"
    "RWOEyNAdMeY2iQMTJU9ApqNVrPpjGbg7kL0HrfKCQM236d16DKfXIiUmZw/NONKnrliAIs6/WSzKdW/JUyTLiKfPV1ItODmw5eNz7lV3"
    "6dR8g3us/bpWp4OaDIInrLxYZRfkLHLvXGGg5ogY2k/FMno/3UBbS0QfstK+ByB/pFVYCHWgDjctwpOHaqAAXAiWHAUh1KOpXBMv8qnd"
    "pzhsYhvKbrL371aBST0e3iPW/K4x+kFfgdeClsftS9RnE8KDCf4Uz+9QMP9sxj4+ZACztE19eBVaSvCqv54wO6n5248UzbqPXzA1dweK"
    "Qziw/FnPWC7qMrcs3jDi6PBPhpruk1xBy08MQg58l4YzuXrPm5gAyiUAyfNszvhTotaU02oljhvg24CycDo/2PvQY7sBmisIsVVeHssi"
    "Rxg23CMgWHaPMDn6OM+IhF2xaAqJOjfnsFBWlvMg8LxsrBnOQ1YABVLLtMvCSaIvgBjPt8XtLn9gZ0HL9OvGsR3efWHTR5p4nZyuHH2N"
    "m8F3nWKVkEI4p4H6Yo5O0hkzCi1ZB7QT3uEIeR0Hq3g/bLTzmm6XzsjWSmQ8CtPapmXX476QT44wU0CWJ096SqUGUq2ZCDg3kFkV0BuK"
    "PIfLCt4sYK9bjj8UZCqkhyHbVm2x+HQwk8mNnDbUd7PK89riPjA33KX0Sw32RE0uKtB0sC8m7t028aEupsRx56/M0jBgeYmEHuRrXpW9"
    "nuOkQPTBaHdmYBHNkzTF2arPzZK3diFuhKPvmSQh2CN6g8r0p3EN+dmps1fIUfHM6emkEuaod+ZG83vyJsyd5B2oPMTVP12z8VJtDRAY"
    "fA5bRj+HEw2aD4f23u/Zq3PHk2C9T5LTAu28WCuO/EpXGSIkq1/hRpyE0qhJSnPN9/iE74PoU1OgjGBv6uSUsNhNZJeMe2W23s8EAySt"
    "B5+u83IBgUctrGwXzNdoC9LY1p+kNFSAZXIggNB3alVzoS+D9rcCYTUAafpkdwLaYq5/w0wRchljkG61rl+gZCiwtqZv3SHVxO7kRTAz"
    "fHsGDB1yc/9Sz++IMGyFHYvuqtclhpHPPToFByaVl687b1P4t2i/U4fWPZ4BBhN5Q7HGTxubspw1GY2MjBYU5OXvEJu9aWeibkM/fg6Q"
    "rxPRYNsJBNJQRywMjYHj6AefrZeGXGxSNgS50kCNBvV7XTli/17y3MFgR4WfNmBK3BqKb87v3DBMVnLHcqvw1ZVjFPv91q0XYaDdVFHq"
    "OnS4Fh5nfwh1qfuvKrUZlwFPcwW+pG4YDyjx90MTFugpQ6KfEusmUhB5Dqr79nYWbOhW3e0PCEZtxmVrH9EtCHEgO6wnkWjPke6XULAR"
    "u0ECF1gZvQczEjKfzxCt6Rknz+27lXyzgzRyHWxr0kB/pFty+8IebrDfIW9757d+1QLonDTmkLQiirF0ygsgQALmk1KljcHD/qiAZPHh"
    "5YX+Q2VdDfIfGeMXmCg3nX5r5DINcx47fNHtgWeGn8MjF8Hnff6x+ZU/7YqcBrDOvGqn46FBvuRY0+mWkRo576207vQR/023owl7pXZ5"
    "p/75V5yDkTZWDtXsfKjpypcxrWIBsg5GC25nZdjQQGBtFUF1pfn+xvunq9AEIFidYY2Vyc3mYw8TW7PkVKis5PENhdbfJHDtIdIiQsLe"
    "+1Nr+/wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA4eKDU="
    "\n"
)


def test_another_implementations_key_and_cosignature_agree_with_ours():
    verifier = parse_vkey(TORCHWOOD_VKEY)
    assert isinstance(verifier, MLDSA44CosignatureVerifier)
    assert MLDSA44Cosigner(verifier.name, TORCHWOOD_SEED).vkey() == TORCHWOOD_VKEY  # FIPS 204 key generation from the seed
    note, verified = open_note(TORCHWOOD_CHECKPOINT + "\n" + TORCHWOOD_LINE, [verifier])
    assert [timestamp_of(s) for s in verified] == [0]
    assert not verifier.verify(TORCHWOOD_CHECKPOINT.replace("\n1\n", "\n2\n").encode(), verified[0].signature)
