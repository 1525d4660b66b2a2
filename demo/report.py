"""What the demo shows: the files the worker wrote, read back by the keys on the rows.

`collect` reads the rows (faces, matches, files, keys) and each file from
storage; `contact_sheet` draws the DNP member's reference, then one row per photo
(upload, public file, each DNP member's own file) with every face outlined, and
labelled with its similarity and decision where it is blurred or shown as its
member's own (every face, in a small group); `write_html` lists the same per photo,
with the keys.
"""

import html
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from django.core.files.storage import default_storage

from faces import thresholds
from faces.models import EventMember, Face, Photo, PhotoVariant
from faces.publication import faces_blurred_in
from faces.rendering.painters import expanded_face_box, region_box

PANEL_WIDTH = 480
GAP = 12
FONT = cv2.FONT_HERSHEY_SIMPLEX
# BGR, per decision.
COLOURS = {"blurred": (40, 40, 230), "own": (60, 190, 60), "visible": (0, 200, 255), "region": (200, 60, 200)}
BACKGROUND = (245, 245, 245)
REFERENCE_HEIGHT = 200
# A crowd's faces are outlined; only those blurred or shown as their own are labelled.
LABEL_EVERY_FACE_UP_TO = 12
INK = (30, 30, 30)


def short(user_id) -> str:
    return str(user_id)[:8]


@dataclass
class Column:
    header: str  # "upload", "public", "own: <short user id>"
    key: str | None  # None: no such file for this photo
    image: np.ndarray | None
    decisions: list[str]  # per face: "blurred" / "own" / "visible"; empty for the upload


@dataclass
class PhotoReport:
    name: str
    photo: Photo
    faces: list[Face]
    columns: list[Column]
    variants: list[PhotoVariant]

    @property
    def files_written(self) -> int:
        """Files the worker rendered (thumbnails not counted): a public file of its own plus each own file."""
        return int(self.photo.public_key != self.photo.upload_key) + len(self.variants)


def collect(demo_photos) -> list[PhotoReport]:
    """Per demo photo (`.name`, `.photo`): its faces, and upload/public/own files with each face's decision."""
    reports = []
    for demo_photo in demo_photos:
        photo = Photo.objects.get(id=demo_photo.photo.id)
        faces = sorted(photo.faces.all(), key=lambda face: face.box_x)
        dnp_users = sorted(
            EventMember.objects.filter(
                event_id=photo.event_id, status=EventMember.Status.ACTIVE, do_not_publish=True
            ).values_list("user_id", flat=True)
        )
        variants = {variant.user_id: variant for variant in photo.variants.all()}
        columns = [
            Column("upload", photo.upload_key, read_image(photo.upload_key), []),
            Column("public", photo.public_key, read_image(photo.public_key), decisions(photo, faces, None)),
        ]
        for user_id in dnp_users:
            variant = variants.get(user_id)
            header = f"own: {short(user_id)}"
            if variant is None:
                columns.append(Column(header, None, None, []))
            else:
                columns.append(Column(header, variant.key, read_image(variant.key), decisions(photo, faces, user_id)))
        reports.append(PhotoReport(demo_photo.name, photo, faces, columns, list(variants.values())))
    return reports


def decisions(photo: Photo, faces: list[Face], viewer: uuid.UUID | None) -> list[str]:
    """Per face, what the file for `viewer` (None: public) does with it, by the worker's own rule."""
    blurred = {face.id for face in faces_blurred_in(photo, viewer)}
    result = []
    for face in faces:
        if face.id in blurred:
            result.append("blurred")
        elif viewer is not None and face.matched_user_id == viewer:
            result.append("own")
        else:
            result.append("visible")
    return result


def read_image(key: str | None) -> np.ndarray | None:
    if not key:
        return None
    with default_storage.open(key, "rb") as handle:
        data = handle.read()
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


# -- the contact sheet ------------------------------------------------------------


def contact_sheet(reports: list[PhotoReport], title: str, reference: np.ndarray, reference_name: str) -> np.ndarray:
    """The DNP member's reference first (what the worker matched against), then one row per photo."""
    rows = [reference_row(reference, reference_name), *(sheet_row(report) for report in reports)]
    width = max(row.shape[1] for row in rows)
    header = np.full((64, width, 3), BACKGROUND, np.uint8)
    cv2.putText(header, title, (GAP, 26), FONT, 0.6, INK, 1, cv2.LINE_AA)
    x = GAP
    for name in ("blurred", "own", "visible", "region"):
        cv2.rectangle(header, (x, 40), (x + 14, 54), COLOURS[name], -1)
        cv2.putText(header, name, (x + 20, 52), FONT, 0.45, INK, 1, cv2.LINE_AA)
        x += 110
    key = "#n 0.63: face n, its best similarity to a reference (labelled where blurred or own; all in a small group)"
    cv2.putText(header, key, (x + 10, 52), FONT, 0.45, INK, 1, cv2.LINE_AA)
    padded = [np.pad(row, ((0, 0), (0, width - row.shape[1]), (0, 0)), constant_values=245) for row in rows]
    return np.vstack([header, *padded])


def reference_row(image: np.ndarray, name: str) -> np.ndarray:
    """The reference as its member uploaded it: another photo of them, not a crop of any upload."""
    height = REFERENCE_HEIGHT
    shown = cv2.resize(image, (max(1, round(image.shape[1] * height / image.shape[0])), height), cv2.INTER_AREA)
    row = np.full((30 + height + GAP, GAP + shown.shape[1] + GAP + 600, 3), BACKGROUND, np.uint8)
    cv2.putText(row, f"the DNP member's reference: {name}", (GAP, 21), FONT, 0.55, INK, 1, cv2.LINE_AA)
    row[30 : 30 + height, GAP : GAP + shown.shape[1]] = shown
    return row


def sheet_row(report: PhotoReport) -> np.ndarray:
    panels = [panel(report, column) for column in report.columns]
    height = max(p.shape[0] for p in panels)
    title_height, header_height = 30, 24
    width = GAP + len(panels) * (PANEL_WIDTH + GAP)
    row = np.full((title_height + header_height + height + GAP, width, 3), BACKGROUND, np.uint8)
    photo = report.photo
    title = (
        f"{report.name}  photo {short(photo.id)}  v{photo.variant_version}  {photo.width}x{photo.height}  "
        f"faces {len(report.faces)}  files written {report.files_written}"
    )
    cv2.putText(row, title, (GAP, 21), FONT, 0.55, INK, 1, cv2.LINE_AA)
    for index, (column, image) in enumerate(zip(report.columns, panels, strict=True)):
        x = GAP + index * (PANEL_WIDTH + GAP)
        cv2.putText(row, column.header, (x, title_height + 17), FONT, 0.5, INK, 1, cv2.LINE_AA)
        top = title_height + header_height
        row[top : top + image.shape[0], x : x + image.shape[1]] = image
    return row


def panel(report: PhotoReport, column: Column) -> np.ndarray:
    if column.image is None:
        blank = np.full((PANEL_WIDTH * 2 // 3, PANEL_WIDTH, 3), 225, np.uint8)
        for line, text in enumerate(("no own file:", "this member is not in this photo")):
            cv2.putText(blank, text, (20, 40 + 24 * line), FONT, 0.5, INK, 1, cv2.LINE_AA)
        return blank
    source_height, source_width = column.image.shape[:2]
    scale = PANEL_WIDTH / source_width
    size = (PANEL_WIDTH, max(1, round(source_height * scale)))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    image = cv2.resize(column.image, size, interpolation=interpolation)
    height, width = image.shape[:2]
    if column.header != "upload":
        for region in report.photo.blur_regions:
            x1, y1, x2, y2 = region_box(region, width, height)
            cv2.rectangle(image, (x1, y1), (x2 - 1, y2 - 1), COLOURS["region"], 2)
            label(image, "region", (x1 + 4, y1 + 16), COLOURS["region"])
    label_all = len(report.faces) <= LABEL_EVERY_FACE_UP_TO
    for number, face in enumerate(report.faces):
        x1, y1, x2, y2 = expanded_face_box((face.box_x, face.box_y, face.box_w, face.box_h), width, height)
        decision = column.decisions[number] if column.decisions else None
        colour = COLOURS[decision] if decision else (255, 255, 255)
        centre, axes = ((x1 + x2) // 2, (y1 + y2) // 2), ((x2 - x1) // 2, (y2 - y1) // 2)
        cv2.ellipse(image, centre, axes, 0, 0, 360, colour, 2 if label_all else 1, cv2.LINE_AA)
        if not label_all and decision in (None, "visible"):
            continue
        similarity = "-" if face.similarity is None else f"{face.similarity:.3f}"
        lines = [f"#{number} {similarity}", decision] if decision else [f"#{number} {similarity}"]
        # Under the face; a face reaching the bottom edge gets its label inside, bottom up.
        first = min(y2 + 14, height - 4 - 15 * (len(lines) - 1))
        for line, text in enumerate(lines):
            label(image, text, (max(0, x1), first + 15 * line), colour)
    return image


def label(image: np.ndarray, text: str, origin: tuple[int, int], colour) -> None:
    (text_width, text_height), baseline = cv2.getTextSize(text, FONT, 0.42, 1)
    x, y = origin
    x = min(x, image.shape[1] - text_width - 2)
    cv2.rectangle(image, (x - 1, y - text_height - 2), (x + text_width + 1, y + baseline), (20, 20, 20), -1)
    cv2.putText(image, text, (x, y), FONT, 0.42, colour, 1, cv2.LINE_AA)


def write_png(path: Path, image: np.ndarray) -> None:
    ok, data = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, 6])
    if not ok:
        raise RuntimeError("PNG encoding failed")
    path.write_bytes(data.tobytes())


# -- the HTML report ----------------------------------------------------------------


def write_html(path: Path, reports: list[PhotoReport], *, seeded, summary: list[tuple[str, str]], sheet_name: str):
    engine = next((face.engine for report in reports for face in report.faces), None)
    seeded.reference.refresh_from_db()  # its status after the worker ran, not as seeded
    engine_thresholds = thresholds.for_engine(engine) if engine else None
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>MomentLens demo</title><style>",
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}",
        "table{border-collapse:collapse;margin:.5em 0 1.5em}",
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:14px}code{font-size:13px}",
        ".blurred{color:#c00}.own{color:#080}.visible{color:#a60}img{max-width:100%}",
        "</style></head><body>",
        f"<h1>MomentLens demo: {e(seeded.event.name)}</h1>",
        f"<p>event <code>{seeded.event.id}</code>; engine <code>{e(str(engine))}</code>; thresholds "
        + (
            f"match {engine_thresholds.match}, blur {engine_thresholds.blur}, cluster {engine_thresholds.cluster}"
            if engine_thresholds
            else "none"
        )
        + f". DNP member <code>{seeded.dnp_user}</code>, reference <code>{e(seeded.reference.upload_key)}</code> "
        f"(status {e(seeded.reference.status)}): {e(seeded.reference_name)}, another photo of them.</p>",
        "<h2>Summary</h2><table>",
        *(f"<tr><th>{e(name)}</th><td>{e(value)}</td></tr>" for name, value in summary),
        "</table>",
        f"<h2>Contact sheet</h2><p><img src='{e(sheet_name)}' alt='contact sheet'></p>",
        "<h2>Jobs sent (as the API sends them; the worker enqueues the rest)</h2>",
        "<table><tr><th>msg_id</th><th>message</th></tr>",
        *(
            f"<tr><td>{sent['msg_id']}</td><td><code>{e(json.dumps(message(sent)))}</code></td></tr>"
            for sent in seeded.sent
        ),
        "</table>",
    ]
    for report in reports:
        parts += photo_section(report)
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")


def message(sent: dict) -> dict:
    return {key: value for key, value in sent.items() if key != "msg_id"}


def photo_section(report: PhotoReport) -> list[str]:
    e = html.escape
    photo = report.photo
    file_columns = [column for column in report.columns if column.decisions or column.header == "public"]
    heads = "".join(f"<th>{e(column.header)}</th>" for column in file_columns)
    out = [
        f"<h2>{e(report.name)}</h2>",
        f"<p>photo <code>{photo.id}</code>, {photo.width} x {photo.height}, version {photo.variant_version}, "
        f"published {photo.processed_at:%Y-%m-%d %H:%M:%S} UTC, "
        f"blur regions <code>{e(json.dumps(photo.blur_regions))}</code>; "
        f"{len(report.faces)} faces, {report.files_written} files written.</p>",
        "<h3>Faces</h3><table><tr><th>#</th><th>box (x, y, w, h)</th><th>det score</th><th>matched user</th>"
        f"<th>similarity</th><th>unknown cluster</th>{heads}</tr>",
    ]
    for number, face in enumerate(report.faces):
        box = f"{face.box_x:.3f}, {face.box_y:.3f}, {face.box_w:.3f}, {face.box_h:.3f}"
        similarity = "—" if face.similarity is None else f"{face.similarity:.4f}"
        matched = f"<code>{face.matched_user_id}</code>" if face.matched_user_id else "—"
        cluster = short(face.unknown_cluster_id) if face.unknown_cluster_id else "—"
        cells = "".join(
            f"<td class='{d}'>{d}</td>"
            for d in (column.decisions[number] if column.decisions else "—" for column in file_columns)
        )
        out.append(
            f"<tr><td>{number}</td><td>{box}</td><td>{face.det_score:.3f}</td><td>{matched}</td>"
            f"<td>{similarity}</td><td>{cluster}</td>{cells}</tr>"
        )
    out.append("</table>")
    if not report.faces:
        out.append("<p>No face detected.</p>")
    out.append("<h3>Files and keys</h3><table><tr><th>file</th><th>key</th><th>bytes</th></tr>")
    rows = [
        ("upload", photo.upload_key),
        ("upload thumbnail", photo.upload_thumb_key),
        (
            "public" + (" (the upload: nothing to blur)" if photo.public_key == photo.upload_key else ""),
            photo.public_key,
        ),
        ("public thumbnail", photo.public_thumb_key),
    ]
    for variant in report.variants:
        rows += [
            (f"own: {variant.user_id}", variant.key),
            (f"own thumbnail: {short(variant.user_id)}", variant.thumb_key),
        ]
    for name, key in rows:
        size = default_storage.size(key) if key and default_storage.exists(key) else "missing"
        out.append(f"<tr><td>{e(name)}</td><td><code>{e(str(key))}</code></td><td>{size}</td></tr>")
    out.append("</table>")
    return out
