"""Study files: declare models × datasets × designs once, run and report them with one command."""

from pfr.studies.execute import run_study
from pfr.studies.schema import Study, load_study

__all__ = ["Study", "load_study", "run_study"]
