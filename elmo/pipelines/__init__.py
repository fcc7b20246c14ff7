"""What the commands run, end to end: :mod:`.pretraining` (``ELMO.py``), :mod:`.classification`
(``classification.py``), :mod:`.baselines` (``baselines.py``), :mod:`.finetuning`, :mod:`.predict_command`,
:mod:`.embedding` and :mod:`.export` (``python -m elmo finetune``, ``predict``, ``embed``, ``export``), on the shared
start-up and flags of :mod:`.common`, the task recipe of :mod:`.task` and the plots of :mod:`.plots`.
The three training pipelines never import each other."""
