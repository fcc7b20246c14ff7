"""What the commands run, end to end: :mod:`.pretraining` (``ELMO.py``), :mod:`.classification`
(``classification.py``), :mod:`.baselines` (``baselines.py``) and :mod:`.predict_command` (``python -m elmo
predict``, ``classification.py --predict``), on the shared
start-up and flags of :mod:`.common`, the task recipe of :mod:`.task` and the plots of :mod:`.plots`.
The three training pipelines never import each other."""
