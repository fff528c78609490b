"""Model backends behind one batch-first protocol, chosen by name and imported lazily."""

from sago_core.backends.protocol import Backend, Generation, ScoringRequest, TeacherForced

__all__ = ["Backend", "Generation", "ScoringRequest", "TeacherForced"]
