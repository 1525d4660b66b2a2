from django.apps import AppConfig


class FacesConfig(AppConfig):
    name = "faces"
    verbose_name = "Faces, matching and rendering"
