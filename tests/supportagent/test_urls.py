"""The site's own small pages: the favicon every staff page links to."""

from django.test import Client
from django.urls import reverse


def test_the_favicon_exists_and_every_staff_page_links_to_it(staff_client):
    icon = Client().get("/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert icon.content.decode().startswith("<svg") and "max-age=86400" in icon["Cache-Control"]
    assert Client().get("/favicon.ico")["Location"] == "/favicon.svg"
    for page in (Client().get(reverse("admin:login")), staff_client.get(reverse("admin:index"))):
        assert '<link rel="icon" href="/favicon.svg" type="image/svg+xml">' in page.content.decode()
