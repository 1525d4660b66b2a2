from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "demo"
    verbose_name = "Demo: the main job end to end on the embedded defaults"
