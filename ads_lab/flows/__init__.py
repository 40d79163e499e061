"""The lab's Prefect flows and their tasks: ``ads-demo`` (``ads demo``) and ``ads-study`` (``bench/study.py``,
``bench/experiment2.py``), and ``launch``, their one call each under the product's build runner."""
