"""The Airflow plugin: the table-health app at ``/lake/`` and its Browse-menu entry."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from lake_airflow.health.app import create_app

URL_PREFIX = "/lake"


class LakeAirflowPlugin(AirflowPlugin):
    name = "lake_airflow"
    fastapi_apps = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "Lake table health"},
    ]
    external_views = [
        {
            "name": "Lake tables",
            "href": f"{URL_PREFIX}/",  # the trailing slash matters: /lake is Airflow's page
            "destination": "nav",
            "category": "browse",
            "url_route": "lake-tables",
        },
    ]
