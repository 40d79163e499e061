"""The pre-declared studies (docs/study.md, docs/experiment2.md) on the demo's task at full size: the step-0 regime
(``start``), DOTS's predictor for the task (``predictor``), the runs (``study``), the paired analysis
(``study_analysis``), the window traces (``study_plots``), and Experiment 2's gates, analysis and report.

The orchestration is the ``ads-study`` Prefect flow (``ads_lab.flows.ads_study``); this package never imports
Prefect.
"""
