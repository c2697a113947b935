"""Triggers that run on Airflow's triggerer, so waiting holds no worker slot."""
