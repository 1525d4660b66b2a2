"""How near strangers come to a reference: an engine's population of faces, which moves each DNP reference's blur bar.

One flat blur threshold prices every DNP member alike, yet references differ. A selfie that strangers' faces rarely
come near (an unusual face, a photo from another decade than the event's) leaves its owner's own faces at low
similarities too, under the bar; a selfie that many strangers reach blurs a crowd. So each reference's bar moves by
how far strangers' similarities to it reach, predicted from the population's statistics: the mean face `mean` and
the covariance `covariance` of unit embeddings (each person weighing one, whatever their count of photos). Strangers'
similarities to a reference r have the mean r·mean and the variance rᵀ·covariance·r; `reach` is their 97th percentile
were they normal. The bar moves by the reference's reach less a typical reference's (`centre`), within bounds
(`Calibration`). A population holds no person's face: only these averages over a labelled set
(`manage.py measure_thresholds --population`; docs/ARCHITECTURE.md §6 has the figures).
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from faces.engines.base import EMBEDDING_DIMENSIONS

POPULATIONS = Path(__file__).resolve().parent / "populations"


@dataclass(frozen=True)
class Calibration:
    # The reach is the mean plus this many spreads: strangers' 97th percentile, were their similarities normal.
    spread: float = 1.9
    # No bar moves further than these, down or up: past every reference of the measured set (they moved from -0.031
    # to +0.024), so that a reference unlike any face (not a face's crop at all) moves no bar far.
    lowest: float = -0.05
    highest: float = 0.03


CALIBRATION = Calibration()


@dataclass(frozen=True)
class Population:
    mean: np.ndarray  # (EMBEDDING_DIMENSIONS,)
    covariance: np.ndarray  # (EMBEDDING_DIMENSIONS, EMBEDDING_DIMENSIONS)
    centre: float  # the reach of a typical reference: the median over the measured set's references

    def reach(self, references: np.ndarray) -> np.ndarray:
        """(R,): how far strangers' similarities to each reference reach."""
        references = np.asarray(references, dtype=np.float64).reshape(-1, EMBEDDING_DIMENSIONS)
        variance = ((references @ self.covariance) * references).sum(axis=1)  # rᵀΣr, one matrix product for all
        return references @ self.mean + CALIBRATION.spread * np.sqrt(np.maximum(variance, 0.0))

    def shifts(self, references: np.ndarray) -> np.ndarray:
        """(R,): how far each reference's blur bars move (negative: down, more of its faces blurred)."""
        return np.clip(self.reach(references) - self.centre, CALIBRATION.lowest, CALIBRATION.highest)

    def save(self, path: Path) -> None:
        """Written whole, then moved into place: a worker starting meanwhile reads the old file or the new one."""
        path = Path(path)
        partial = path.with_name(f".{path.name}.partial.npz")
        np.savez_compressed(
            partial,
            mean=self.mean.astype(np.float32),
            covariance=self.covariance.astype(np.float16),  # its precision moves no bar by 1e-4
            centre=np.float64(self.centre),
        )
        os.replace(partial, path)

    @classmethod
    def load(cls, path: Path) -> "Population":
        with np.load(path) as stored:
            mean, covariance = stored["mean"].astype(np.float64), stored["covariance"].astype(np.float64)
            population = cls(mean, covariance, float(stored["centre"]))
        if mean.shape != (EMBEDDING_DIMENSIONS,) or covariance.shape != (EMBEDDING_DIMENSIONS,) * 2:
            raise ValueError(f"{path}: not a population of {EMBEDDING_DIMENSIONS}-d embeddings")
        return population


def path_for(engine: str) -> Path:
    return POPULATIONS / f"{engine}.npz"


@functools.cache
def for_engine(engine: str) -> Population:
    """The engine's population, read once; FileNotFoundError where thresholds say it is measured and it is not here
    (the preflight check says so first: faces/checks.py)."""
    return Population.load(path_for(engine))


@dataclass(frozen=True)
class Moments:
    """A labelled set's faces summed per person: what a population is made from, and made again without one person
    (`without`), so that a measured member's own photos never calibrate their own bar."""

    people: int
    means: np.ndarray  # (EMBEDDING_DIMENSIONS,): the sum over people of each one's mean face
    squares: np.ndarray  # (D, D): the sum over people of each one's mean outer product
    own: dict[str, np.ndarray]  # each person's embeddings

    @classmethod
    def of(cls, embeddings: np.ndarray, people: list[str]) -> "Moments":
        embeddings = np.asarray(embeddings, dtype=np.float64).reshape(-1, EMBEDDING_DIMENSIONS)
        names = np.array(people)
        own = {person: embeddings[names == person] for person in dict.fromkeys(people)}
        means = sum((faces.mean(axis=0) for faces in own.values()), np.zeros(EMBEDDING_DIMENSIONS))
        squares = sum((faces.T @ faces / len(faces) for faces in own.values()), np.zeros((EMBEDDING_DIMENSIONS,) * 2))
        return cls(len(own), means, squares, own)

    def without(self, person: str | None, centre: float = 0.0) -> Population:
        """The population of everyone but `person` (None: everyone)."""
        means, squares, people = self.means, self.squares, self.people
        if person in self.own:
            faces = self.own[person]
            means, squares, people = means - faces.mean(axis=0), squares - faces.T @ faces / len(faces), people - 1
        mean = means / people
        return Population(mean, squares / people - np.outer(mean, mean), centre)
