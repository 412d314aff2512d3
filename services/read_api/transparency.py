"""``/log/``: the transparency log, served as a C2SP tlog-tiles log (docs/transparency.md).

Tiles and entry bundles are immutable (cached for a year); the checkpoint is cacheable for seconds.
Every process serves it, ``--read-only`` ones included: it needs only a reader's access to the log.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import Response

from services.log import MAX_SEQ
from services.log.tlog_store import TileMissing
from services.read_api.api_state import Api
from services.read_api.errors import ErrorBody, bad_request
from services.read_api.sequences import decimal_at_most
from services.tlog.published import NoTree, PublishedLog
from tlog.errors import TlogFormatError
from tlog.tiles import parse_path

router = APIRouter(prefix="/log", tags=["transparency log"])
IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}
FRESH = {"Cache-Control": "public, max-age=2"}
TEXT = "text/plain; charset=utf-8"
# An entry index in decimal, 0 to 2^63-1 (as a log sequence is bounded: services/read_api/sequences.py).
INDEX_PATTERN = rf"^{decimal_at_most(MAX_SEQ)}$"
NO_TREE = {404: {"model": ErrorBody, "description": "`no_tree`: the integrator has not made the log's tree yet."}}
# A tile path as C2SP tlog-tiles writes it (tlog/tiles.py reads it): the level (or `entries`), the index in
# three-digit elements, all but the last prefixed by x, and a partial tile's width.
TILE_PATH = r"^(entries|[0-9]|[1-5][0-9]|6[0-3])/(x[0-9]{3}/)*[0-9]{3}(\.p/([1-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5]))?$"


def _published(api: Api) -> PublishedLog:
    published = api.published_log()
    if published is None:
        raise HTTPException(503, detail={"error": "not_ready", "message": "the API is not connected to the log yet"})
    return published


def _no_tree(error: NoTree) -> HTTPException:
    return HTTPException(404, detail={"error": "no_tree", "message": str(error)})


@router.get("/checkpoint", response_class=Response, responses={200: {"content": {TEXT: {}}}, **NO_TREE})
async def checkpoint(api: Api) -> Response:
    """The log's last signed checkpoint (C2SP tlog-checkpoint), with the cosignatures it has."""
    try:
        note, _ = await _published(api).signed()
    except NoTree as error:
        raise _no_tree(error) from None
    return Response(note, media_type=TEXT, headers=FRESH)


@router.get("/vkey", response_class=Response, responses={200: {"content": {TEXT: {}}}, **NO_TREE})
async def vkey(api: Api) -> Response:
    """The log's verifier key, in signed-note form: ``<origin>+<key id>+<base64 key>``."""
    try:
        key = await _published(api).vkey()
    except NoTree as error:
        raise _no_tree(error) from None
    return Response(key + "\n", media_type=TEXT, headers=FRESH)


@router.get(
    "/tile/{path:path}",
    response_class=Response,
    responses={
        200: {"content": {"application/octet-stream": {}}},
        404: {"model": ErrorBody, "description": "`no_tree`, or `tile_not_found`: no such tile (yet)."},
    },
)
async def tile(api: Api, path: str = Path(pattern=TILE_PATH)) -> Response:
    """A hash tile (``tile/<L>/<N>[.p/<W>]``) or an entry bundle (``tile/entries/<N>[.p/<W>]``)."""
    try:
        wanted = parse_path(f"tile/{path}")
    except TlogFormatError as error:
        raise bad_request("bad_tile_path", str(error)) from None
    try:
        data = await _published(api).tile(wanted)
    except NoTree as error:
        raise _no_tree(error) from None
    except TileMissing:
        raise HTTPException(404, detail={"error": "tile_not_found", "message": f"no tile {wanted.path()} (yet)"}) from None
    return Response(data, media_type="application/octet-stream", headers=IMMUTABLE)


@router.get(
    "/proof/{index}",
    response_class=Response,
    responses={
        200: {"content": {TEXT: {}}},
        404: {"model": ErrorBody, "description": "`no_tree`, or `not_integrated`: the entry is not in the signed tree yet."},
    },
)
async def proof(api: Api, index: str = Path(pattern=INDEX_PATTERN)) -> Response:
    """The C2SP tlog-proof of entry ``index`` (stream sequence ``index + 1``): checkpoint, index, inclusion proof."""
    try:
        text = await _published(api).proof(int(index))
    except NoTree as error:
        raise _no_tree(error) from None
    if text is None:
        raise HTTPException(404, detail={"error": "not_integrated", "message": f"entry {index} is not in the signed tree yet"})
    return Response(text, media_type=TEXT, headers=FRESH)
