"""Smoke: the app starts on every stack and answers `/api/status` in the envelope."""

from tests.harness import Running


async def test_status_answers_in_the_envelope(app: Running) -> None:
    response = await app.client().get("/api/status")
    assert response.status_code == 200
    body = response.json()
    assert body["success"] is True and body["message"] == ""
    assert body["data"]["system_name"] == "Tollway"
    assert body["data"]["setup"] is False
    assert len(response.headers["x-request-id"]) == 32
